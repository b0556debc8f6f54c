// Regressions: the findings of the last 30 days (/v1/regressions) —
// regressions and improvements between versions, shifts within one — and,
// with ?id=, one finding's evidence: the numbers the test decided on, the
// windows compared, and what the continuous profiles say changed.
import { getJSON, el, header, showError, fmt } from './lib.js';

header('Regressions');
const main = document.getElementById('main');
const id = new URLSearchParams(location.search).get('id');

const ratio = (r) => `×${r.ratio.toFixed(3)} [${r.ratio_lo.toFixed(3)}, ${r.ratio_hi.toFixed(3)}]`;
const versions = (r) => r.kind === 'shift' ? `${r.new_tag} (same version)` : `${r.old_tag} → ${r.new_tag}`;

async function list() {
  const found = (await getJSON('/v1/regressions?since=30d')).regressions;
  const head = ['DECIDED', 'KIND', 'PROGRAM', 'VERSIONS', 'NS/RUN BEFORE → AFTER', 'RATIO [95%]', 'P', 'ID'];
  const rows = found.slice().reverse().map((r) => el('tr', { class: r.kind },
    el('td', { class: 'text' }, fmt.time(r.time)), el('td', { class: 'text' }, r.kind),
    el('td', { class: 'text' }, el('a', { href: `program.html?prog=${r.prog_id}` }, r.program)),
    el('td', { class: 'text' }, versions(r)),
    el('td', {}, `${fmt.ns(r.before_ns_per_run)} → ${fmt.ns(r.after_ns_per_run)}`),
    el('td', {}, ratio(r)), el('td', {}, r.p.toPrecision(2)),
    el('td', { class: 'text' }, el('a', { href: `regressions.html?id=${r.id}` }, r.id))));
  main.replaceChildren(el('h1', {}, 'Regressions of the last 30 days'),
    found.length ? el('table', { id: 'regressions' }, el('tr', {}, ...head.map((h, i) => el('th', { class: i < 4 || i === 7 ? 'text' : null }, h))), ...rows)
      : el('p', { class: 'empty' }, 'No regression, improvement or shift found in the last 30 days.'));
}

async function one() {
  const r = await getJSON(`/v1/regressions/${encodeURIComponent(id)}`);
  const kv = [
    ['program', el('a', { href: `program.html?prog=${r.prog_id}` }, `${r.program} (${r.type}, id ${r.prog_id})`)],
    ['versions', versions(r)],
    ['changed', fmt.time(r.changed)],
    ['ns/run', `${fmt.ns(r.before_ns_per_run)} → ${fmt.ns(r.after_ns_per_run)}`],
    ['ratio of medians, 95%', ratio(r)],
    ['Mann-Whitney U', `p = ${r.p.toPrecision(2)} (alpha ${r.alpha}), minimum change ${(r.min_change * 100).toFixed(0)}%`],
    ['intervals compared', `${r.n_before} before, ${r.n_after} after, at ${fmt.rate(r.runs_per_sec_lo)}–${fmt.rate(r.runs_per_sec_hi)} runs/s`],
    ['windows', `${fmt.time(r.before_from)} – ${fmt.time(r.before_to)} against ${fmt.time(r.after_from)} – ${fmt.time(r.after_to)}`],
    ['machine drift', r.controls ? `×${r.drift.toFixed(3)} from ${r.controls} unchanged programs, divided out` : 'no unchanged program to tell it'],
  ];
  const ex = r.explanation;
  const changes = ex.off ? el('p', { class: 'empty' }, ex.off)
    : el('table', { id: 'explanation' },
      el('tr', {}, el('th', { class: 'text' }, 'LEVEL'), el('th', { class: 'text' }, 'NAME'), el('th', {}, 'CPU% BEFORE'), el('th', {}, 'CPU% AFTER'), el('th', {}, 'CHANGE')),
      ...(ex.top || []).map((c) => el('tr', {}, el('td', { class: 'text' }, c.level), el('td', { class: 'text' }, c.name),
        el('td', {}, fmt.pct(c.before_cpu_percent)), el('td', {}, fmt.pct(c.after_cpu_percent)),
        el('td', {}, (c.after_cpu_percent - c.before_cpu_percent >= 0 ? '+' : '') + (c.after_cpu_percent - c.before_cpu_percent).toFixed(2) + ' pts'))));
  main.replaceChildren(
    el('h1', {}, `${r.kind} ${r.id}: ${r.program}`),
    el('table', { class: 'kv', id: 'evidence' }, ...kv.map(([k, v]) => el('tr', {}, el('th', { class: 'text' }, k), el('td', { class: 'text' }, v)))),
    el('h2', {}, `What the profiles say changed (${ex.before_profiles} windows before, ${ex.after_profiles} after)`),
    changes,
    ex.off ? '' : el('p', {}, el('a', { href: `/v1/regressions/${r.id}/diff`, download: `${r.id}-diff.pb.gz` }, 'the profile diff'),
      ' for go tool pprof (positive values grew)'));
}

(id ? one() : list()).catch((e) => showError(main, e));
