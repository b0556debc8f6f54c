// Benchmarks: the stored runs (/v1/bench/runs), one run's results
// (/v1/bench/runs/{id}, the report `bpfperf bench -o json` wrote) with its
// tail-call chain-length curve, and two runs' medians side by side.
import { getJSON, el, header, showError, fmt } from './lib.js';

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
    el('p', {}, 'Compare two runs: bench.html?run=NEW&base=OLD'));
}

async function run(id, baseId) {
  const rep = await getJSON(`/v1/bench/runs/${encodeURIComponent(id)}`);
  const base = baseId ? await getJSON(`/v1/bench/runs/${encodeURIComponent(baseId)}`) : null;
  const baseBy = new Map((base?.results || []).map((r) => [r.name, r]));
  const head = ['TEST', 'MEDIAN', 'IQR', 'CV', 'N', ...(base ? [`RUN ${baseId} MEDIAN`, 'Δ %'] : []), 'NOTE'];
  const rows = rep.results.map((r) => {
    const b = baseBy.get(r.name);
    const delta = b && b.summary.median_ns ? 100 * (r.summary.median_ns / b.summary.median_ns - 1) : null;
    return el('tr', {}, el('td', { class: 'text' }, r.name), el('td', {}, fmt.ns(r.summary.median_ns)), el('td', {}, fmt.ns(r.summary.iqr_ns)),
      el('td', {}, r.summary.cv?.toFixed(3) ?? ''), el('td', {}, r.summary.n),
      ...(base ? [el('td', {}, b ? fmt.ns(b.summary.median_ns) : ''), el('td', {}, delta == null ? '' : delta.toFixed(1))] : []),
      el('td', { class: 'text' }, r.error || r.skipped || ''));
  });
  main.replaceChildren(el('h1', {}, `Benchmark run ${id}${base ? ` against run ${baseId}` : ''}`),
    el('p', {}, `${fmt.time(rep.time)} · kernel ${rep.fingerprint.kernel} · ${rep.fingerprint.cpus} CPUs · `,
      el('a', { href: 'bench.html' }, 'all runs')));
  if (base) main.append(el('p', { class: 'empty' }, 'Δ compares medians only; bpfperf bench compare tells which differences are significant.'));
  const tail = rep.results.filter((r) => r.group === 'tailcall' && !r.error && !r.skipped && r.labels?.chain && r.name !== 'tailcall/limit')
    .map((r) => [Number(r.labels.chain), r.summary.median_ns]).sort((a, b) => a[0] - b[0]);
  if (tail.length) {
    const box = el('div', { class: 'chart', id: 'tailcalls' });
    main.append(el('h2', {}, 'Tail calls: ns per run vs chain length'), box);
    new uPlot({ width: Math.min(900, main.clientWidth - 10), height: 260, scales: { x: { time: false } },
      series: [{ label: 'tail calls' }, { label: 'median ns/run', stroke: '#2563eb', width: 1.5, points: { show: true } }],
      axes: [{ label: 'tail calls in the chain' }, { label: 'ns/run (median)', size: 60 }] },
    [tail.map((t) => t[0]), tail.map((t) => t[1])], box);
  }
  main.append(el('h2', {}, 'Results'), el('table', { id: 'results' }, el('tr', {}, ...head.map((h, i) => el('th', { class: i === 0 || i === head.length - 1 ? 'text' : null }, h))), ...rows));
}

(params.get('run') ? run(params.get('run'), params.get('base')) : list()).catch((e) => showError(main, e));
