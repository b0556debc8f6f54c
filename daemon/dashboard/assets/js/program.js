// Program: one program's ns/run, runs/s, CPU % and sampled CPU % over a
// range (/v1/history, /v1/counters/history), with reloads, new versions
// and other events marked (/v1/events), its metadata (/v1/progs/{prog}),
// its latest perf counter windows, who triggers it over the range
// (/v1/triggers) and what its hook costs (/v1/hooks), its per-run latency
// windows (/v1/latency/history: p50, p99, p99.9 over time and the newest
// window's distribution), and pprof's flame graph of the continuous
// profiles of the range, focused on the program.
import { getJSON, el, header, showError, fmt, ranges, stepFor, timeChart } from './lib.js';

header('Programs');
const main = document.getElementById('main');
const params = new URLSearchParams(location.search);
const prog = params.get('prog');
const range = ranges[params.get('range')] ? params.get('range') : '1h';

const markColors = { reload: '#dc2626', new_version: '#ea580c', loaded: '#16a34a', unloaded: '#6b7280', latency_window: '#0891b2' };

async function load() {
  if (!prog) throw new Error('no program: open a program from the Programs page');
  const det = await getJSON(`/v1/progs/${encodeURIComponent(prog)}`);
  const until = Math.floor(Date.now() / 1000);
  const since = until - ranges[range];
  // ?step= (seconds) asks for a resolution, as `bpfperf history --step` does.
  const asked = Number(params.get('step')) > 0 ? Number(params.get('step')) : 0;
  const step = asked || stepFor(ranges[range]);
  const window = `since=${new Date(since * 1000).toISOString()}&until=${new Date(until * 1000).toISOString()}`;
  // The program's identity stitches its instances across reloads, as
  // `bpfperf history IDENTITY` does; before its identity is settled (its
  // first seconds), this instance alone.
  const historyOf = async (ref, step) => {
    const h = await getJSON(`/v1/history?prog=${encodeURIComponent(ref)}&${window}&step=${step}s`);
    // A program younger than the range: a step for its life instead.
    const first = h.points.length ? Date.parse(h.points[0].time) / 1000 : until;
    const fine = stepFor(until - first);
    return !asked && fine < step && h.points.length < 100 ? historyOf(ref, fine) : h;
  };
  let ref = det.identity_id || String(det.id);
  let hist = await historyOf(ref, step).catch(() => null);
  if (!hist) {
    ref = String(det.id);
    hist = await historyOf(ref, step);
  }
  const [events, counters, latency] = await Promise.all([
    getJSON(`/v1/events?prog=${encodeURIComponent(ref)}&${window}`),
    getJSON(`/v1/counters/history?prog=${encodeURIComponent(ref)}&${window}`),
    getJSON(`/v1/latency/history?prog=${encodeURIComponent(ref)}&${window}`).catch(() => ({ windows: [] })),
  ]);

  const where = det.where ? ` · ${det.where}` : '';
  const title = el('h1', {}, `${det.name} `, el('small', {}, `id ${det.id} · ${det.type}${where} · tag ${det.tag}${det.loaded ? '' : ' · unloaded'}`));
  const picker = el('div', { class: 'controls' }, 'Range:');
  for (const r of Object.keys(ranges)) {
    const b = el('button', { class: r === range ? 'here' : null }, r);
    b.onclick = () => { params.set('range', r); location.search = params.toString(); };
    picker.append(b);
  }
  picker.append(el('span', { class: 'empty' }, `one point per ${hist.step_ms / 1000} s, read from ${hist.resolution || 'raw'} samples`));

  const marks = [];
  for (const p of hist.points) if (p.reload) marks.push({ t: Date.parse(p.time) / 1000, label: 'reload', color: markColors.reload });
  for (const e of events.events) {
    // A latency window is marked too: while open, timing adds to each
    // run's bpf_stats run time (its event says how much).
    if (e.kind === 'loaded' || e.kind === 'unloaded' || e.kind === 'new_version' || e.kind === 'latency_window' || /regression|improvement|shift/.test(e.kind)) {
      marks.push({ t: Date.parse(e.time) / 1000, label: e.kind.replace('_', ' '), color: markColors[e.kind] || '#9333ea' });
    }
  }

  const charts = el('div', { class: 'charts', id: 'charts' });
  main.replaceChildren(title, picker, charts);
  const xs = hist.points.map((p) => Date.parse(p.time) / 1000);
  const series = [
    ['avg ns/run', 'avg_ns_per_run', fmt.ns],
    ['runs/s', 'runs_per_sec', fmt.rate],
    ['CPU % of one CPU (bpf_stats)', 'cpu_percent', fmt.pct],
  ];
  for (const [label, key, format] of series) {
    const box = el('div', { class: 'chart' });
    charts.append(box);
    timeChart(box, label, xs, [{ label, values: hist.points.map((p) => p[key] ?? null), format }], marks);
  }
  // Sampled CPU %: each continuous profile window's cpu-clock time in the
  // program (samples × period) over the window's length.
  const sampled = counters.points.filter((p) => p.mechanism === 'sampled' && p.totals && p.window_end);
  const box = el('div', { class: 'chart' });
  charts.append(box);
  if (sampled.length) {
    timeChart(box, 'sampled CPU % (cpu-clock profile windows)', sampled.map((p) => Date.parse(p.window_end) / 1000),
      [{ label: 'sampled CPU %', format: fmt.pct, values: sampled.map((p) => {
        const ns = (Date.parse(p.window_end) - Date.parse(p.window_start)) * 1e6;
        return ns > 0 ? 100 * (p.totals['cpu-clock'] ?? 0) / ns : null;
      }) }], marks);
  } else {
    box.append(el('p', { class: 'empty' }, 'sampled CPU %: no continuous profile windows in this range'));
  }

  // Who makes it run: the workloads (cgroup, unit, container, pod) or
  // interrupt contexts its sampled CPU came from, as `bpfperf triggers`.
  // Profiles name programs by this boot's ids.
  main.append(el('h2', {}, 'Who triggers it'));
  const triggers = el('div', { id: 'triggers' });
  main.append(triggers);
  try {
    const tr = await getJSON(`/v1/triggers?prog=${det.id}&${window}`);
    const rows = tr.rows.map((r) => el('tr', {}, ...[r.workload, r.context, fmt.count(r.samples), fmt.pct(r.cpu_percent), fmt.pct(100 * r.share)]
      .map((v, i) => el('td', { class: i < 2 ? 'text' : null }, v))));
    triggers.append(el('table', {}, el('tr', {}, ...['WORKLOAD', 'CONTEXT', 'SAMPLES', 'CPU % OF ONE CPU', 'SHARE']
      .map((h, i) => el('th', { class: i < 2 ? 'text' : null }, h))), ...rows),
    el('p', { class: 'empty' }, `from ${tr.windows} continuous profile windows; task context is charged to the cgroup that ran, interrupt context (softirq, hardirq) to the context and its devices`));
  } catch (e) {
    triggers.append(el('p', { class: 'empty' }, e.message));
  }

  // What entering it from its hook costs, outside its run time, as
  // `bpfperf hooks PROG`.
  main.append(el('h2', {}, 'Hook overhead (outside run_time_ns)'));
  const hooks = el('div', { id: 'hooks' });
  main.append(hooks);
  try {
    const h = await getJSON(`/v1/hooks?prog=${det.id}&${window}`);
    const rows = h.rows.map((r) => el('tr', {}, ...[r.hook, fmt.ns(r.ns_per_run), r.run_time_ratio == null ? '' : r.run_time_ratio.toFixed(2) + 'x',
      fmt.pct(r.cpu_percent), String(r.programs.length)].map((v, i) => el('td', { class: i < 1 ? 'text' : null }, v))));
    hooks.append(el('table', {}, el('tr', {}, ...['HOOK', 'NS/RUN', 'VS RUN_TIME', 'CPU % OF ONE CPU', 'PROGRAMS SHARING IT']
      .map((t, i) => el('th', { class: i < 1 ? 'text' : null }, t))), ...rows));
  } catch (e) {
    hooks.append(el('p', { class: 'empty' }, e.message));
  }

  // Per-run latency, as `bpfperf history PROG --latency` and `bpfperf
  // latency PROG`: every run timed in bounded windows.
  main.append(el('h2', {}, 'Latency per run (timed windows)'));
  const lat = el('div', { id: 'latency' });
  main.append(lat);
  const ws = latency.windows;
  if (ws.length) {
    const box = el('div', { class: 'chart' });
    lat.append(box);
    timeChart(box, 'p50, p99, p99.9 per window', ws.map((w) => Date.parse(w.end) / 1000), [
      { label: 'p50', format: fmt.ns, values: ws.map((w) => w.p50_ns) },
      { label: 'p99', format: fmt.ns, values: ws.map((w) => w.p99_ns) },
      { label: 'p99.9', format: fmt.ns, values: ws.map((w) => w.p999_ns) },
    ], marks);
    const w = ws[ws.length - 1];
    const most = Math.max(...w.buckets.map((b) => b.runs));
    const rows = w.buckets.map((b) => el('tr', {}, el('td', { class: 'text' }, `${fmt.ns(b.lo_ns)} – ${b.hi_ns ? fmt.ns(b.hi_ns) : '∞'}`),
      el('td', {}, fmt.count(b.runs)),
      el('td', { class: 'text' }, el('span', { class: 'bar', style: `width:${Math.max(1, Math.round(300 * b.runs / most))}px` }))));
    lat.append(el('p', {}, `Newest window (${fmt.time(w.end)}, ${w.duration_s.toFixed(1)} s): ${fmt.count(w.runs)} runs, mean ${fmt.ns(w.mean_ns)}, `
      + `p50 ${fmt.ns(w.p50_ns)}, p90 ${fmt.ns(w.p90_ns)}, p99 ${fmt.ns(w.p99_ns)}, p99.9 ${fmt.ns(w.p999_ns)}, max ${fmt.ns(w.max_ns)}`),
    el('table', { class: 'distribution' }, el('tr', {}, ...['RUN TIME (RAW)', 'RUNS', ''].map((h, i) => el('th', { class: i !== 1 ? 'text' : null }, h))), ...rows),
    el('p', { class: 'empty' }, `figures less the timing floor of ${fmt.ns(w.floor_ns)}, within ${w.error_pct.toFixed(1)}%; while a window is open timing adds about ${fmt.ns(w.added_ns_per_run)} to each run's bpf_stats run time`));
    // The perf event counted per run beside the time (--latency.event).
    const e = w.per_run;
    if (e) {
      const n = (v) => fmt.count(Math.round(v));
      lat.append(el('p', {}, `${e.event} per run: mean ${n(e.mean)}, p50 ${n(e.p50)}, p90 ${n(e.p90)}, p99 ${n(e.p99)}, p99.9 ${n(e.p999)}, `
        + `max ${n(e.max)} over ${fmt.count(e.runs)} runs (less the timing's own ${n(e.floor)})`));
    }
  } else {
    lat.append(el('p', { class: 'empty' }, 'No latency windows in this range: bpfperf latency PROG, or bpfperfd --latency.programs.'));
  }

  main.append(el('h2', {}, 'Flame graph of the range (continuous profiles merged, this program\'s samples)'));
  const tf = encodeURIComponent(`prog_name=^${det.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  const pprofURL = `/ui/pprof/merge/${since}/${until}/`;
  main.append(el('p', {}, el('a', { href: `${pprofURL}flamegraph?tf=${tf}` }, 'open in pprof'), ' (flame graph, top, source)'));
  // Lazy: merging a long range's windows is the daemon's heaviest read.
  main.append(el('iframe', { class: 'pprof', id: 'flamegraph', loading: 'lazy', src: `${pprofURL}flamegraph?tf=${tf}` }));

  main.append(el('h2', {}, 'Latest perf counter windows'));
  const last = counters.points.slice(-10).reverse();
  if (last.length) {
    const rows = last.map((p) => el('tr', {}, ...[fmt.time(p.window_end), p.mechanism, fmt.count(p.counted_runs), fmt.ns(p.cpu_clock_ns_per_run),
      p.cycles_per_run?.toFixed(1) ?? '', p.instructions_per_run?.toFixed(1) ?? '', p.ipc?.toFixed(2) ?? '', p.llc_misses_per_run?.toFixed(3) ?? '']
      .map((v, i) => el('td', { class: i < 2 ? 'text' : null }, v))));
    main.append(el('table', {}, el('tr', {}, ...['WINDOW END', 'MECHANISM', 'RUNS', 'CPU-CLOCK/RUN', 'CYCLES/RUN', 'INSNS/RUN', 'IPC', 'LLC MISSES/RUN']
      .map((h, i) => el('th', { class: i < 2 ? 'text' : null }, h))), ...rows));
  } else {
    main.append(el('p', { class: 'empty' }, 'No perf counter windows in this range.'));
  }

  main.append(el('h2', {}, 'Metadata'));
  const m = det.meta;
  const meta = [
    ['loaded', fmt.time(m.loaded_at)], ['uid', m.uid], ['GPL compatible', m.gpl_compatible],
    ['bytes xlated / jited / memlock', `${m.bytes_xlated} / ${m.bytes_jited} / ${m.bytes_memlock}`],
    ['verified insns', m.verified_insns], ['maps', (m.map_ids || []).join(', ')], ['BTF id', m.btf_id],
    ['attached', (m.attach || []).map((a) => `${a.type} ${a.target}${a.netns ? ` in ${a.netns}` : ''}`).join('; ') || '–'],
    ['held by', (m.pids || []).map((o) => `${o.comm} (${o.pid})`).join(', ') || '–'],
    // The Kubernetes pod that runs it, where the CRI socket named it.
    ['pod', det.k8s ? `${det.k8s.namespace}/${det.k8s.pod} (container ${det.k8s.container}), workload ${det.k8s.workload}` : '–'],
    ['run_cnt / run_time_ns', `${fmt.count(det.run_cnt)} / ${fmt.count(det.run_time_ns)}`],
    ['avg ns/run since load', fmt.ns(det.avg_ns_per_run_since_load)],
  ];
  main.append(el('dl', { class: 'meta' }, ...meta.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])));
  // Drawn: uPlot paints on a microtask; after the next frame the charts
  // are on screen. The mark is ms since navigation started (make bench).
  requestAnimationFrame(() => setTimeout(() => { document.body.dataset.drawn = String(performance.now()); }));
}

load().catch((e) => showError(main, e));
