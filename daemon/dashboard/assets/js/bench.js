// Benchmarks: the stored runs (/v1/bench/runs), one run's results
// (/v1/bench/runs/{id}, the report `bpfperf bench -o json` wrote) with its
// tail-call chain-length curve, and two runs compared as `bpfperf bench
// compare` does (/v1/bench/compare: the CLI's medians, intervals and
// Mann-Whitney U test, computed by the daemon with the same code).
import { getJSON, el, header, showError, fmt, drawnPlugin } from './lib.js';

header('Benchmarks');
const main = document.getElementById('main');
const params = new URLSearchParams(location.search);

async function list() {
  const runs = (await getJSON('/v1/bench/runs?since=8760h')).runs;
  const rows = runs.reverse().map((r) => el('tr', {},
    el('td', {}, el('a', { href: `bench.html?run=${r.id}` }, r.id)), el('td', { class: 'text' }, fmt.time(r.time)),
    el('td', { class: 'text' }, r.label || ''), el('td', {}, r.tests), el('td', {}, r.failed),
    el('td', { class: 'text' }, r.kernel), el('td', { class: 'text' }, r.git_commit || '')));
  main.replaceChildren(el('h1', {}, 'Stored benchmark runs'),
    runs.length ? el('table', { id: 'runs' }, el('tr', {}, ...['RUN', 'TIME', 'LABEL', 'TESTS', 'FAILED', 'KERNEL', 'COMMIT'].map((h) => el('th', {}, h))), ...rows)
      : el('p', { class: 'empty' }, 'No stored runs: bpfperf bench --store keeps one.'),
    el('p', {}, 'Compare two runs as bpfperf bench compare does: bench.html?run=NEW&base=OLD'));
}

async function run(id, baseId) {
  const rep = await getJSON(`/v1/bench/runs/${encodeURIComponent(id)}`);
  const cmp = baseId ? await getJSON(`/v1/bench/compare?base=${encodeURIComponent(baseId)}&new=${encodeURIComponent(id)}`) : null;
  const head = ['TEST', 'MEDIAN', 'IQR', 'CV', 'N', 'NOTE'];
  const rows = rep.results.map((r) => el('tr', {}, el('td', { class: 'text' }, r.name), el('td', {}, fmt.ns(r.summary.median_ns)),
    el('td', {}, fmt.ns(r.summary.iqr_ns)), el('td', {}, r.summary.cv?.toFixed(3) ?? ''), el('td', {}, r.summary.n),
    el('td', { class: 'text' }, r.error || r.skipped || '')));
  main.replaceChildren(el('h1', {}, `Benchmark run ${id}${cmp ? ` against run ${baseId}` : ''}`),
    el('p', {}, `${fmt.time(rep.time)} · kernel ${rep.fingerprint.kernel} · ${rep.fingerprint.cpus} CPUs · `,
      el('a', { href: 'bench.html' }, 'all runs')));
  if (cmp) {
    const crows = cmp.deltas.map((d) => el('tr', { class: d.significant ? 'significant' : null }, el('td', { class: 'text' }, d.test),
      el('td', {}, `${fmt.ns(d.base_ns)} ${d.base_ci}`), el('td', {}, `${fmt.ns(d.new_ns)} ${d.new_ci}`),
      el('td', {}, `${d.delta_pct >= 0 ? '+' : ''}${d.delta_pct.toFixed(1)}%`), el('td', {}, d.p.toFixed(3)),
      el('td', { class: 'text' }, d.significant ? 'significant' : '~'), el('td', { class: 'text' }, (d.warnings || []).join('; '))));
    main.append(el('h2', {}, `Compared with run ${baseId} (α ${cmp.alpha}, changes under ${cmp.min_delta_pct}% are drift)`),
      el('table', { id: 'compare' }, el('tr', {}, ...['TEST', 'BASE', 'NEW', 'Δ', 'P', '', 'NOTE'].map((h, i) => el('th', { class: i === 0 || i > 4 ? 'text' : null }, h))), ...crows));
  }
  const tail = rep.results.filter((r) => r.group === 'tailcall' && !r.error && !r.skipped && r.labels?.chain && r.name !== 'tailcall/limit')
    .map((r) => [Number(r.labels.chain), r.summary.median_ns]).sort((a, b) => a[0] - b[0]);
  if (tail.length) {
    const box = el('div', { class: 'chart', id: 'tailcalls' });
    main.append(el('h2', {}, 'Tail calls: ns per run vs chain length'), box);
    new uPlot({ width: Math.min(900, main.clientWidth - 10), height: 260, scales: { x: { time: false } },
      series: [{ label: 'tail calls' }, { label: 'median ns/run', stroke: '#2563eb', width: 1.5, points: { show: true } }],
      axes: [{ label: 'tail calls in the chain' }, { label: 'ns/run (median)', size: 60 }], plugins: [drawnPlugin(box)] },
    [tail.map((t) => t[0]), tail.map((t) => t[1])], box);
  }
  drawMaps(rep);
  main.append(el('h2', {}, 'Results'), el('table', { id: 'results' }, el('tr', {}, ...head.map((h, i) => el('th', { class: i === 0 || i === head.length - 1 ? 'text' : null }, h))), ...rows));
}

// drawMaps draws bench plot's map panels: one per operation and key
// pattern, median ns/run against map entries (log scale), a line per map
// type.
function drawMaps(rep) {
  const panels = new Map();
  for (const r of rep.results) {
    if (r.group !== 'maps' || r.error || r.skipped || !r.labels?.size) continue;
    const title = `${r.labels.op}, ${r.labels.keys} keys`;
    if (!panels.has(title)) panels.set(title, new Map());
    const lines = panels.get(title);
    if (!lines.has(r.labels.map)) lines.set(r.labels.map, []);
    lines.get(r.labels.map).push([Number(r.labels.size), r.summary.median_ns]);
  }
  if (!panels.size) return;
  const grid = el('div', { class: 'charts', id: 'maps' });
  main.append(el('h2', {}, 'Maps: ns per run vs map entries'), grid);
  const colors = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#a16207', '#db2777'];
  for (const [title, lines] of panels) {
    const names = [...lines.keys()].sort();
    const data = uPlot.join(names.map((n) => {
      const pts = lines.get(n).sort((a, b) => a[0] - b[0]);
      return [pts.map((p) => p[0]), pts.map((p) => p[1])];
    }));
    const box = el('div', { class: 'chart' });
    grid.append(box);
    new uPlot({ title, width: 540, height: 260, scales: { x: { time: false, distr: 3 } }, plugins: [drawnPlugin(box)],
      series: [{ label: 'entries' }, ...names.map((n, i) => ({ label: n, stroke: colors[i % colors.length], width: 1.5, spanGaps: true, points: { show: true } }))],
      axes: [{ label: 'map entries' }, { label: 'ns/run (median)', size: 60 }] }, data, box);
  }
}

(params.get('run') ? run(params.get('run'), params.get('base')) : list()).catch((e) => showError(main, e));
