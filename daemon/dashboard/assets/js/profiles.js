// Profiles: the stored profiles of the last day (/v1/profiles), each opened
// in pprof's own web UI (flame graph, top, source) served by the daemon,
// and the difference of two.
import { getJSON, el, header, showError, fmt } from './lib.js';

header('Profiles');
const main = document.getElementById('main');

async function load() {
  const list = await getJSON('/v1/profiles?since=24h&kind=all');
  const diff = el('p', { class: 'controls' });
  const pick = { base: null, id: null };
  const drawDiff = () => {
    diff.replaceChildren(pick.base && pick.id
      ? el('a', { id: 'diff', href: `/ui/pprof/diff/${pick.base}/${pick.id}/flamegraph` }, `flame graph of ${pick.id} minus ${pick.base}`)
      : 'Pick a base and a new profile to diff them.');
  };
  const radio = (name, id) => {
    const r = el('input', { type: 'radio', name, value: id });
    r.onchange = () => { pick[name] = id; drawDiff(); };
    return r;
  };
  const head = ['START', 'KIND', 'EVENT', 'HZ', 'SAMPLES', 'SECONDS', 'BYTES', 'VIEWS', 'BASE', 'NEW'];
  const rows = list.reverse().map((p) => el('tr', {},
    el('td', { class: 'text' }, fmt.time(p.start)), el('td', { class: 'text' }, p.kind), el('td', { class: 'text' }, p.event),
    el('td', {}, p.hz), el('td', {}, fmt.count(p.samples)), el('td', {}, (p.duration_ns / 1e9).toFixed(1)), el('td', {}, fmt.count(p.bytes)),
    el('td', { class: 'text' }, el('a', { href: `/ui/pprof/id/${p.id}/flamegraph` }, 'flame graph'), ' ',
      el('a', { href: `/ui/pprof/id/${p.id}/top` }, 'top')),
    el('td', {}, radio('base', p.id)), el('td', {}, radio('id', p.id))));
  drawDiff();
  main.replaceChildren(el('h1', {}, 'Profiles of the last day'), diff,
    list.length ? el('table', { id: 'profiles' }, el('tr', {}, ...head.map((h, i) => el('th', { class: i < 3 || i === 7 ? 'text' : null }, h))), ...rows)
      : el('p', { class: 'empty' }, 'No stored profiles in the last day (is --profile.every on?).'));
}

load().catch((e) => showError(main, e));
