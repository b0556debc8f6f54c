// Shared helpers of the dashboard's pages: reading /v1, formatting numbers
// as the CLI does, and time charts on uPlot (a global from its script tag).

// getJSON reads a /v1 answer; an error answer throws with the daemon's message.
export async function getJSON(path) {
  const resp = await fetch(path);
  const body = await resp.json().catch(() => null);
  if (!resp.ok) throw new Error(body && body.error ? body.error : `${path}: ${resp.status}`);
  return body;
}

// el makes an element with attributes and children (strings become text).
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c ?? ''));
  return e;
}

// header draws the navigation bar, marking the page we are on.
export function header(here) {
  const pages = [['Programs', './'], ['Profiles', 'profiles.html'], ['Benchmarks', 'bench.html'], ['Regressions', 'regressions.html']];
  const h = el('header', {}, el('b', {}, 'bpfperf'));
  for (const [name, href] of pages) h.append(el('a', { href, class: name === here ? 'here' : null }, name));
  document.body.prepend(h);
}

export function showError(where, err) {
  where.replaceChildren(el('p', { class: 'error' }, err.message || String(err)));
}

const num = (v, d) => (v === undefined || v === null || !isFinite(v)) ? '' : v.toFixed(d);
export const fmt = {
  ns: (v) => v == null ? '' : v >= 1e6 ? num(v / 1e6, 2) + ' ms' : v >= 1e3 ? num(v / 1e3, 2) + ' µs' : num(v, 1) + ' ns',
  rate: (v) => v == null ? '' : v >= 1e6 ? num(v / 1e6, 2) + 'M' : v >= 1e3 ? num(v / 1e3, 1) + 'k' : num(v, 1),
  pct: (v) => v == null ? '' : num(v, 2) + '%',
  count: (v) => v == null ? '' : Number(v).toLocaleString('en'),
  time: (t) => t ? new Date(t).toLocaleString() : '',
};

// Ranges the program page offers, and the step of each: one point per step
// is read (/v1/history?step=, which picks raw samples, minute or hour
// rollups from it as `bpfperf history --step` does), about 700 points a
// range, or a program's life when that is shorter.
export const ranges = { '1h': 3600, '6h': 6 * 3600, '1d': 86400, '1w': 7 * 86400, '30d': 30 * 86400, '1y': 365 * 86400 };
const steps = [1, 2, 5, 10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
export function stepFor(seconds) {
  const want = seconds / 700;
  return steps.find((s) => s >= want) ?? steps[steps.length - 1];
}

// timeChart draws series over time in el: xs in unix seconds, each series
// {label, values, unit}; marks [{t, label, color}] are vertical lines
// (reloads, new versions, events) on the time axis.
export function timeChart(where, title, xs, series, marks = [], height = 220) {
  const colors = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#a16207', '#db2777'];
  const opts = {
    title, width: Math.max(320, where.clientWidth - 10), height,
    cursor: { drag: { x: true, y: false } },
    scales: { x: { time: true } },
    series: [{}, ...series.map((s, i) => ({
      label: s.label, stroke: colors[i % colors.length], width: 1.5, spanGaps: false,
      value: (u, v) => v == null ? '–' : (s.format ? s.format(v) : v.toFixed(2)),
    }))],
    axes: [{}, { size: 70, values: (u, vs) => vs.map((v) => series[0].format ? series[0].format(v) : v) }],
    plugins: [marksPlugin(marks), drawnPlugin(where)],
  };
  where.replaceChildren();
  return new uPlot(opts, [xs, ...series.map((s) => s.values)], where);
}

// drawnPlugin says what uPlot drew, for tests and for people, in
// el.dataset.points, set from uPlot's own hooks once it has drawn: the
// points with a value, inside the drawn x and y scales, of each shown
// series whose path uPlot built. A chart that never drew has no
// data-points; one whose data went missing before drawing says 0.
export function drawnPlugin(el) {
  let drawn = 0;
  delete el.dataset.points;
  return {
    hooks: {
      drawClear: [() => { drawn = 0; }],
      drawSeries: [(u, si) => {
        const s = u.series[si];
        if (!s._paths) return;
        const xs = u.data[0], ys = u.data[si], x = u.scales.x, y = u.scales[s.scale];
        const [i0, i1] = s.idxs ?? [0, ys.length - 1];
        for (let i = i0; i <= i1; i++) {
          if (ys[i] != null && xs[i] >= x.min && xs[i] <= x.max && ys[i] >= y.min && ys[i] <= y.max) drawn++;
        }
      }],
      draw: [() => { el.dataset.points = drawn; }],
    },
  };
}

function marksPlugin(marks) {
  return {
    hooks: {
      draw: [(u) => {
        const { ctx } = u;
        const { top, height } = u.bbox;
        ctx.save();
        ctx.lineWidth = 1;
        ctx.font = `${10 * devicePixelRatio}px sans-serif`;
        // Labels of marks close together (a program loaded, then its
        // identity settled as a new version seconds later) go one line
        // lower each, so that none is printed over another.
        const rowEnds = [];
        for (const m of [...marks].sort((a, b) => a.t - b.t)) {
          const x = Math.round(u.valToPos(m.t, 'x', true));
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.strokeStyle = m.color || '#999';
          ctx.setLineDash([4, 3]);
          ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
          ctx.fillStyle = m.color || '#666';
          let row = rowEnds.findIndex((end) => end < x);
          if (row < 0) row = rowEnds.length;
          rowEnds[row] = x + 3 + ctx.measureText(m.label).width + 4 * devicePixelRatio;
          ctx.fillText(m.label, x + 3, top + (12 + 12 * row) * devicePixelRatio);
        }
        ctx.restore();
      }],
    },
  };
}

// sortableTable renders rows (objects) in a table with columns
// [{key, label, text, format, href}]; clicking a header sorts by it.
export function sortableTable(where, columns, rows, state, rowClass) {
  const sorted = [...rows].sort((a, b) => {
    const x = a[state.key], y = b[state.key];
    const c = (x ?? -Infinity) < (y ?? -Infinity) ? -1 : (x ?? -Infinity) > (y ?? -Infinity) ? 1 : 0;
    return state.desc ? -c : c;
  });
  const head = el('tr');
  for (const c of columns) {
    const th = el('th', { class: c.text ? 'text' : null, 'data-key': c.key,
      'aria-sort': state.key === c.key ? (state.desc ? 'descending' : 'ascending') : null }, c.label);
    th.onclick = () => {
      state.desc = state.key === c.key ? !state.desc : !c.text;
      state.key = c.key;
      sortableTable(where, columns, rows, state, rowClass);
    };
    head.append(th);
  }
  const body = sorted.map((r) => {
    const tr = el('tr', { class: rowClass ? rowClass(r) : null });
    for (const c of columns) {
      const v = c.format ? c.format(r[c.key], r) : r[c.key];
      const cell = c.href ? el('a', { href: c.href(r) }, v) : v;
      tr.append(el('td', { class: c.text ? 'text' : null }, cell));
    }
    return tr;
  });
  where.replaceChildren(el('table', {}, el('thead', {}, head), el('tbody', {}, ...body)));
}
