// Programs, the front page: the busiest programs' CPU % over the last hour
// (from the store, /v1/history) and the live table (/v1/progs, what
// `bpfperf progs` shows), refreshed every 2 s.
import { getJSON, el, header, showError, fmt, stepFor, timeChart, sortableTable } from './lib.js';

header('Programs');
const main = document.getElementById('main');
const chart = el('div', { class: 'chart', id: 'busiest' });
const filter = el('input', { type: 'search', placeholder: 'filter: name, where, type, tag or id', id: 'filter', size: 32 });
const all = el('input', { type: 'checkbox', id: 'all' });
const table = el('div', { id: 'programs' });
const stats = el('p', { id: 'stats-cost', class: 'note' });
main.replaceChildren(
  el('h1', {}, 'Programs'),
  stats,
  el('h2', {}, 'Busiest programs, CPU % of one CPU, last hour'), chart,
  el('h2', {}, 'Loaded programs'),
  el('div', { class: 'controls' }, filter, el('label', {}, all, ' show unloaded programs')),
  table);

const columns = [
  { key: 'id', label: 'ID', href: (r) => `program.html?prog=${r.id}` },
  { key: 'name', label: 'NAME', text: true, href: (r) => `program.html?prog=${r.id}` },
  { key: 'where', label: 'WHERE', text: true },
  { key: 'type', label: 'TYPE', text: true },
  { key: 'tag', label: 'TAG', text: true },
  { key: 'runs_per_sec', label: 'RUNS/S', format: fmt.rate },
  { key: 'avg_ns_per_run', label: 'AVG/RUN', format: fmt.ns },
  { key: 'cpu_percent', label: 'CPU%', format: fmt.pct },
  { key: 'sampled_cpu_percent', label: 'SAMPLED CPU%', format: fmt.pct },
  { key: 'run_cnt', label: 'RUN_CNT', format: fmt.count },
  { key: 'loaded_at', label: 'LOADED', text: true, format: fmt.time },
];
const sort = { key: 'cpu_percent', desc: true };
let rows = [];

function draw() {
  const f = filter.value.trim().toLowerCase();
  const shown = rows.filter((r) => !f || [r.name, r.where ?? '', r.type, r.tag, String(r.id)].some((v) => v.toLowerCase().includes(f)));
  sortableTable(table, columns, shown, sort, (r) => r.loaded ? null : 'unloaded');
}

async function refresh() {
  try {
    rows = await getJSON('/v1/progs' + (all.checked ? '?all=true' : ''));
    draw();
  } catch (e) {
    showError(table, e);
  }
  try {
    stats.textContent = statsCost((await getJSON('/v1/status')).stats_cost);
  } catch (e) {
    showError(stats, e);
  }
}

// What watching costs the programs (bpf_stats), as `bpfperf status` says
// it: the share of the time stats are on (of each interval, or gathered
// into one interval in several where a host's stats switch is slow), what
// they cost at that share and at full time, and the budget.
function statsCost(sc) {
  if (!sc) return '';
  let s = `bpf_stats on ${sc.duty_percent}% of the time`;
  if (sc.duty_percent < 100) s += ' (runs and run time scaled: estimates)';
  if (sc.paid_cpu_seconds_per_sec != null) {
    s += `; they cost the programs ${fmt.pct(sc.paid_cpu_seconds_per_sec * 100)} of one CPU now`;
    if (sc.duty_percent < 100) s += `, ${fmt.pct(sc.cpu_percent)} at full time`;
  }
  if (sc.budget_percent != null) s += `; budget ${fmt.pct(sc.budget_percent)}`;
  else if (sc.budget) s += `; budget ${sc.budget}`;
  return s + '.';
}

// The busiest five loaded programs by CPU % now, each one's last hour.
async function drawBusiest() {
  const busiest = rows.filter((r) => r.loaded && !r.own).sort((a, b) => (b.cpu_percent ?? 0) - (a.cpu_percent ?? 0)).slice(0, 5);
  if (!busiest.length) {
    chart.replaceChildren(el('p', { class: 'empty' }, 'No programs loaded.'));
    return;
  }
  try {
    const oldest = Math.min(...busiest.map((r) => Date.parse(r.loaded_at) || 0));
    const step = stepFor(Math.min(3600, (Date.now() - oldest) / 1000));
    const hs = await Promise.all(busiest.map((r) => getJSON(`/v1/history?prog=${r.id}&since=1h&step=${step}s`)));
    const tables = hs.map((h) => [h.points.map((p) => Date.parse(p.time) / 1000), h.points.map((p) => p.cpu_percent ?? null)]);
    const data = uPlot.join(tables);
    timeChart(chart, '', data[0], busiest.map((r, i) => ({ label: `${r.name} (${r.id})`, values: data[i + 1], format: fmt.pct })));
  } catch (e) {
    showError(chart, e);
  }
}

// ?all=1 and ?filter= open the page with the toggle and the filter set;
// changing them keeps the address in step, so a view can be shared.
const params = new URLSearchParams(location.search);
all.checked = params.get('all') === '1';
filter.value = params.get('filter') ?? '';
const remember = () => {
  const q = new URLSearchParams();
  if (all.checked) q.set('all', '1');
  if (filter.value) q.set('filter', filter.value);
  history.replaceState(null, '', q.size ? `?${q}` : location.pathname);
};
filter.oninput = () => { remember(); draw(); };
all.onchange = () => { remember(); refresh(); };
await refresh();
await drawBusiest();
setInterval(refresh, 2000);
setInterval(drawBusiest, 30000);
