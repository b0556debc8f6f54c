package daemon_test

import (
	"fmt"
	"sort"
	"strings"
)

// A key is optional in a golden file ("?") only for a stated reason,
// and the run must prove the reason on this host. There are two kinds:
//
//   - absentHere: the key never shows on this host (no hardware PMU, the
//     kernel refuses fentry/fexit, a feature the test does not exercise).
//     The run must not see it anywhere it is declared: if it does, the
//     reason no longer holds (a PMU appeared, say) and the entry must
//     change.
//   - sometimes: the key is in some objects and not in others. The run
//     must see it both present and absent, unless the reason says the
//     test's setup can give only one of the two cases (need says which),
//     or that it depends on timing (need is none).
//
// Entries are keyed by file and path ("prog:perf_counters.cycles_per_run",
// "[]" for an array's elements) or by the key's name alone where one
// reason fits every file. "<key>" (the data keys of a dataKeyed map) is
// not in the table: its keys are data, and an empty map is valid.
type optionalKind int

const (
	absentHere optionalKind = iota + 1
	sometimes
)

// need says which cases a sometimes key must be seen in.
type need int

const (
	both        need = iota // present in one object, absent in another
	presentOnly             // the setup cannot make it absent; the reason says where it is
	absentOnly              // the setup cannot make it present; the reason says where it is
	timing                  // present or absent by timing: nothing can be required
)

type optionalReason struct {
	kind optionalKind
	need need // sometimes only
	why  string
}

func absent(why string) optionalReason { return optionalReason{kind: absentHere, why: why} }
func sometime(n need, why string) optionalReason {
	return optionalReason{kind: sometimes, need: n, why: why}
}

var optionalKeys = map[string]optionalReason{
	// No hardware PMU here: the sampled counters have cpu-clock only.
	"cycles_per_run":                 absent("no hardware PMU: cycles are not counted"),
	"instructions_per_run":           absent("no hardware PMU: instructions are not counted"),
	"ipc":                            absent("no hardware PMU: needs cycles and instructions"),
	"llc_misses_per_run":             absent("no hardware PMU: LLC misses are not counted"),
	"llc_misses_per_1k_instructions": absent("no hardware PMU: LLC misses are not counted"),
	"running_share":                  absent("no hardware PMU: only hardware events are multiplexed; cpu-clock runs all the time"),
	"throttled":                      absent("no hardware PMU: the software cpu-clock event is not throttled at the test's rate"),
	"lost":                           absent("no sample is lost at the test's rate on an idle 2-CPU host"),
	"status:profiling.filter":        sometime(timing, "the kernel filter's state, from the first profile window on: absent before it ends, which the first polls may precede"),
	"status:profiling.drains":        sometime(timing, "the captures' wake-ups, from the first profile window on: absent before it ends, which the first polls may precede"),
	"status:profiling.filter.reason": sometime(absentOnly, "why the kernel filter is off: absent while it is on, as at the defaults the test runs; present where the kernel refuses it or another engineer's tracing program is busy on the host"),

	// The kernel refuses fentry/fexit (tracing programs): no exact window
	// is ever counted, so its fields and the answer to enable never show.
	"counters:targets[].last":                      absent("no fentry/fexit: the counters target never finishes an exact window"),
	"counters:targets[].next_window":               absent("no fentry/fexit: a failed target has no next window"),
	"counters_disable:next_window":                 absent("no fentry/fexit: a failed target has no next window"),
	"counters_disable:window_end":                  absent("no fentry/fexit: the disabled target never opened a window"),
	"counters_disable:samples":                     absent("no fentry/fexit: the disabled target never counted"),
	"counters_disable:event":                       absent("no fentry/fexit: the disabled target has no exact event"),
	"counters_disable:hz":                          absent("no fentry/fexit: the disabled target has no exact event"),
	"counters_disable:detail":                      absent("no fentry/fexit: the disabled target never counted, so no detail of its figures"),
	"counters:status.exact.event":                  absent("no fentry/fexit: exact counting is unavailable, so it names no event"),
	"status:counters.exact.event":                  absent("no fentry/fexit: exact counting is unavailable, so it names no event"),
	"counters:status.exact.hz":                     absent("no fentry/fexit: exact counting is unavailable"),
	"status:counters.exact.hz":                     absent("no fentry/fexit: exact counting is unavailable"),
	"counters:status.exact.samples":                absent("no fentry/fexit: exact counting is unavailable"),
	"status:counters.exact.samples":                absent("no fentry/fexit: exact counting is unavailable"),
	"counters:status.exact.produces":               absent("no fentry/fexit: exact counting is unavailable, so it produces nothing"),
	"status:counters.exact.produces":               absent("no fentry/fexit: exact counting is unavailable, so it produces nothing"),
	"counters:status.exact.detail":                 sometime(presentOnly, "says why exact counting is unavailable (fentry/fexit refused here); where it works it may be absent"),
	"status:counters.exact.detail":                 sometime(presentOnly, "says why exact counting is unavailable (fentry/fexit refused here); where it works it may be absent"),
	"counters:status.sampled[].detail":             sometime(both, "how a sampled event is measured, or why it is not, at length: absent where continuous profiling is off (the bare daemon), whose reason says it all"),
	"status:counters.sampled[].detail":             sometime(both, "how a sampled event is measured, or why it is not, at length: absent where continuous profiling is off (the bare daemon), whose reason says it all"),
	"counters:status.exact.reason":                 sometime(presentOnly, "why exact counting is unavailable (fentry/fexit refused here); absent where it works"),
	"status:latency.reason":                        sometime(presentOnly, "why latency windows are unavailable (fentry/fexit refused here); absent where they work"),
	"status:counters.exact.reason":                 sometime(presentOnly, "why exact counting is unavailable (fentry/fexit refused here); absent where it works"),
	"counters:targets[].reason":                    sometime(presentOnly, "why the target failed; the test's only target fails here (fentry/fexit refused)"),
	"counters:status.failed":                       sometime(timing, "the count of failed targets: absent until the target has tried and failed, which the first polls may precede"),
	"status:counters.failed":                       sometime(both, "the count of failed targets: present while the refused target exists, absent after the test disables it"),
	"entries":                                      absent("runs the entry probe saw, in exact windows only: no exact window counts here (no fentry/fexit)"),
	"stopped":                                      absent("why an exact window ended: no exact window counts here (no fentry/fexit); sampled windows are not stopped"),
	"counters:targets[].last.samples":              absent("no fentry/fexit: the counters target never finishes a window"),
	"counters:targets[].last.totals":               absent("no fentry/fexit: the counters target never finishes a window"),
	"counters:targets[].last.window_end":           absent("no fentry/fexit: the counters target never finishes a window"),
	"counters:targets[].last.cpu_clock_ns_per_run": absent("no fentry/fexit: the counters target never finishes a window"),

	// Sampled (cpu-clock) windows: a sample lands in a program or not.
	"samples":              sometime(timing, "cpu-clock samples that landed in the program in the window: absent when none did, which depends on timing"),
	"cpu_clock_ns_per_run": sometime(timing, "needs samples and counted runs in the window: absent when none landed, which depends on timing"),

	// Features the test does not exercise.
	"events":                 absent("counted events of bpfperf bench --counters, which the test does not use (and that needs a PMU)"),
	"events_net":             absent("bench --counters, which the test does not use"),
	"events_per_run":         absent("bench --counters, which the test does not use"),
	"status:counters.events": absent("the daemon's --counters.events, which the test does not set"),
	"counters:status.events": absent("the daemon's --counters.events, which the test does not set"),
	"waiting":                absent("targets matched beyond --counters.max: the test has one target"),
	"error":                  absent("a bench test that failed: the test's bench run passes"),
	"skipped":                absent("a bench test that cannot run here: the test's one test (baseline/socket_filter) runs everywhere"),
	"noisy":                  absent("a bench test flagged noisy: the quick run of an empty program is not"),
	"changed":                absent("BPF stats counting changed during a bench run: nothing toggles it during the test"),
	"cpus":                   absent("bench --cpus, which the test does not use"),
	"git_commit":             absent("the commit a bench report's CLI was built from (ldflags or vcs.revision): the test's go build of the CLI carries neither here"),
	"last_error":             absent("a sweep or profile window that failed: none fails in the test"),
	"skipped_programs":       absent("programs the sweep skips: none is skipped in the test"),
	"skip_reason":            absent("why programs are skipped: none is skipped in the test"),
	"unit":                   absent("the systemd unit of an owner's cgroup: the test's processes are in the root cgroup (/) here"),
	"container":              absent("the container of an owner's cgroup: the test's processes are in the root cgroup (/) here"),
	"pin":                    absent("the bpffs pin of an object no process holds: the test pins nothing"),
	"gone_at":                absent("a map that was unloaded: the test unloads no map"),
	"boot_id":                absent("a map row of an earlier boot: the test has one boot"),
	"progs:[].unloaded_at":   absent("/v1/progs lists loaded programs only (progs_all and prog have unloaded ones)"),
	"prog:own":               absent("a program held by bpfperfd itself: the test never asks for one by id (progs lists them)"),

	// Maps: entries and fill are absent where the map type has no fill
	// level. The test loads arrays only; the daemon's own maps of loads
	// (daemon/loaders, hashes) are counted where its sys_enter_bpf and
	// sys_exit_bpf tracepoints attached (tracefs mounted), and whether the
	// map read first is one of those or an array depends on the host.
	"map:entries":          sometime(timing, "the daemon's maps of loads (hashes) has a fill level, the test's arrays none; which one the test reads depends on the host"),
	"map:points[].entries": sometime(timing, "the daemon's maps of loads (hashes) has a fill level, the test's arrays none; which one the test reads depends on the host"),
	"maps:maps[].entries":  sometime(timing, "the daemon's maps of loads (hashes) has a fill level where its tracepoint attached, the test's arrays none"),
	"fill_percent":         sometime(timing, "the daemon's maps of loads (hashes) has a fill level where its tracepoint attached, the test's arrays none"),
	"counted":              sometime(timing, "the daemon's maps of loads (hashes) is counted where its tracepoint attached, the test's arrays are not"),
	"loader":               sometime(timing, "a program loaded while the daemon ran has its loader from the kernel's load record; one loaded before it started has none"),
	"partial":              absent("no key walk: every map here is an array"),
	"walk_ns":              absent("no key walk: every map here is an array"),
	// Program rows: the test has a busy program, an idle one, programs
	// that never ran, an attached one, an unloaded one and a reload.
	"attach":                             sometime(both, "attach points: the raw tracepoint program has a link, the socket filters run by test-run have none"),
	"where":                              sometime(both, "where the identity says the program is attached: the raw tracepoint program, not the socket filters"),
	"runs_per_sec":                       sometime(both, "a rate needs two sweeps with runs between: the busy program has one, a program that did not run between sweeps (idle, unloaded) has none"),
	"cpu_percent":                        sometime(both, "a rate needs two sweeps with runs between: the busy program has one, a program that did not run between sweeps (idle, unloaded) has none"),
	"avg_ns_per_run":                     sometime(both, "needs runs between two sweeps: the busy program has them, idle and unloaded ones do not"),
	"avg_ns_per_run_since_load":          sometime(both, "needs a run since load: the twins never run (the attached program runs whenever a task is renamed, an exec on the host say)"),
	"identity":                           sometime(both, "absent until the identity settles, seconds after the program appears: the test reads programs right after loading them and again later"),
	"identity_id":                        sometime(both, "absent until the identity settles, seconds after the program appears: the test reads programs right after loading them and again later"),
	"own":                                sometime(both, "held by bpfperfd itself (its profiler's programs): the listings hold those and the test's"),
	"perf_counters":                      sometime(both, "a finished sampled window that covers the program: the busy program has one, a program loaded after the last window has none"),
	"pids":                               sometime(both, "owners: absent on the unloaded program and before the owner scan (every 5 s) reaches a new one"),
	"sampled_cpu_percent":                sometime(both, "profile samples landed in the program: the busy program has them, the idle ones none"),
	"unloaded_at":                        sometime(both, "only on an unloaded program: the test unloads the first gold_rld"),
	"prog:map_bytes":                     sometime(both, "the memory of the program's maps: absent on the unloaded program"),
	"progs_all:[].map_bytes":             sometime(both, "the memory of the program's maps: absent on the unloaded program"),
	"progs:[].map_bytes":                 sometime(presentOnly, "absent on an unloaded program, which /v1/progs does not list, and before the first map reading, which the test does not catch"),
	"history:points[].reload":            sometime(both, "true on the first point after a reload only: the test reloads gold_rld"),
	"history:step_ms":                    sometime(both, "only with ?step=: the test asks with and without"),
	"owners:since":                       sometime(both, "only with ?since=: the test asks with and without"),
	"owners:until":                       sometime(both, "only with ?since=: the test asks with and without"),
	"owners:owners[].pid":                sometime(both, "a process owner has a pid, comm and cgroup; a pin or \"none\" owner (a program no process holds) has none"),
	"owners:owners[].comm":               sometime(both, "a process owner has a pid, comm and cgroup; a pin or \"none\" owner (a program no process holds) has none"),
	"owners:owners[].cgroup":             sometime(both, "a process owner has a pid, comm and cgroup; a pin or \"none\" owner (a program no process holds) has none"),
	"owners:owners[].runs_per_sec":       sometime(presentOnly, "a rate over the owner's programs: absent where none ran between two sweeps; every owner here has one that runs"),
	"owners:owners[].cpu_percent":        sometime(presentOnly, "a rate over the owner's programs: absent where none ran between two sweeps; every owner here has one that runs"),
	"events:events[].id":                 sometime(both, "program events (loaded, unloaded) name the program; daemon_start and bench_run do not"),
	"events:events[].name":               sometime(both, "program events (loaded, unloaded) name the program; daemon_start and bench_run do not"),
	"events:events[].tag":                sometime(both, "program events (loaded, unloaded) name the program; daemon_start and bench_run do not"),
	"events:events[].identity":           sometime(both, "program events once the identity settled; not daemon events, nor a program's first seconds"),
	"events:events[].detail":             sometime(both, "kinds that explain themselves (bench_run, stats_mode, ...) have one, loaded/unloaded do not"),
	"events:events[].map_id":             sometime(timing, "map events (map_fill, map_leak) only, which a map of the host's filling gives at any time; the test makes none"),
	"counters:status.sampled[].hz":       sometime(both, "an available sampled event (cpu-clock) has hz and produces; the PMU events, refused here, have a reason instead"),
	"status:counters.sampled[].hz":       sometime(both, "an available sampled event (cpu-clock) has hz and produces; the PMU events, refused here, have a reason instead"),
	"counters:status.sampled[].produces": sometime(both, "an available sampled event (cpu-clock) has hz and produces; the PMU events, refused here, have a reason instead"),
	"status:counters.sampled[].produces": sometime(both, "an available sampled event (cpu-clock) has hz and produces; the PMU events, refused here, have a reason instead"),
	"counters:status.sampled[].reason":   sometime(both, "why a sampled event is unavailable: the PMU events here (no PMU), not cpu-clock"),
	"status:counters.sampled[].reason":   sometime(both, "why a sampled event is unavailable: the PMU events here (no PMU), not cpu-clock"),

	// Set by the daemon's flags or the test's requests, which the test
	// gives only one way.
	"programs":                                   sometime(both, "--counters.programs: the test's first daemon sets it, the bare one does not"),
	"status:counters":                            sometime(timing, "perf counters status: absent until the counters have started, just after the daemon's start"),
	"counters_disable:reason":                    sometime(presentOnly, "why the target is not counting: absent on one that never failed; the test's target failed (fentry/fexit refused)"),
	"status:profiling":                           sometime(presentOnly, "absent where the profiler cannot start (perf events refused); it starts here"),
	"status:profiling.every_ms":                  sometime(both, "continuous profiling only: the test's first daemon sets --profile.every, the bare one turns it off"),
	"status:profiling.window_ms":                 sometime(both, "continuous profiling only: the test's first daemon sets --profile.every, the bare one turns it off"),
	"status:profiling.last_profile_id":           sometime(both, "absent until a profile is stored: the bare daemon stores none"),
	"status:profiling.last_profile_start":        sometime(both, "absent until a profile is stored: the bare daemon stores none"),
	"status:sweep_bpf_ms":                        sometime(both, "the iterator's own run time: absent when sweeping by fd, as the bare daemon does"),
	"status:sweep_bpf_cpu_percent":               sometime(both, "the iterator's own run time: absent when sweeping by fd, as the bare daemon does"),
	"status:stats_cost.measured_at":              sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.ns_per_run":               sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.off_ns_per_run":           sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.on_ns_per_run":            sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.cpu_percent":              sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.paid_cpu_seconds_per_sec": sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.wall_clock_ns_per_run":    sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.spread_ns":                sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.pairs":                    sometime(timing, "absent when the measurement could not be made, which a noisy host can cause"),
	"status:stats_cost.budget_percent":           sometime(absentOnly, "present under a budget with the stats' cost measured (TestStatsBudget); here the first daemon runs with --stats.budget 0 and the bare one starts while the first holds stats on, so it cannot measure their cost and has no budget"),
	"map:pids":                                   sometime(presentOnly, "absent for a map no process holds; the maps here all have a holder"),
	"maps:maps[].pids":                           sometime(presentOnly, "absent for a map no process holds; the maps here all have a holder"),
}

// optionalCheck checks every optional key of the golden files against
// optionalKeys and what the run saw.
type optionalCheck struct {
	used     map[string]bool
	problems []string
	// hasPMU and hasFentry: this host has what the reasons "no hardware
	// PMU" and "no fentry/fexit" say it lacks (judged apart from the
	// daemon: privtest.NoPMU, collectors.ProbeCounters). There those keys
	// may or may not show, and nothing is required of them.
	hasPMU, hasFentry bool
}

func (c *optionalCheck) reason(file, path, name string) (optionalReason, bool) {
	for _, k := range []string{file + ":" + path, name} {
		if r, ok := optionalKeys[k]; ok {
			c.used[k] = true
			if r.kind == absentHere && ((c.hasPMU && strings.HasPrefix(r.why, "no hardware PMU")) ||
				(c.hasFentry && strings.HasPrefix(r.why, "no fentry/fexit"))) {
				r = sometime(timing, r.why+" (this host has it)")
			}
			return r, true
		}
	}
	return optionalReason{}, false
}

// walk visits golden's keys at path; seen is what the run saw there (nil
// if nothing). partOnly checks only the absentHere rule (a part of a
// file, seen once).
func (c *optionalCheck) walk(file, path string, seen, golden *shape, partOnly bool) {
	if golden == nil {
		return
	}
	if golden.elem != nil && !golden.elem.empty() {
		var se *shape
		if seen != nil {
			se = seen.elem
		}
		c.walk(file, path+"[]", se, golden.elem, partOnly)
	}
	objSeen := seen != nil && seen.members != nil
	for _, k := range sortedKeys(golden.members) {
		gm := golden.members[k]
		var sm *member
		if objSeen {
			sm = seen.members[k]
		}
		p := strings.TrimPrefix(path+"."+k, ".")
		if gm.optional && k != "<key>" {
			present := sm != nil
			absentSeen := objSeen && (sm == nil || sm.optional)
			state := "never seen"
			switch {
			case present && absentSeen:
				state = "seen present and absent"
			case present:
				state = "seen in every object"
			case absentSeen:
				state = "seen absent only"
			}
			r, ok := c.reason(file, p, k)
			switch {
			case !ok:
				if !partOnly {
					c.problems = append(c.problems, fmt.Sprintf("%s.json: optional key %q has no reason in optionalKeys (%s): make it required or give the reason", file, p, state))
				}
			case r.kind == absentHere && present:
				c.problems = append(c.problems, fmt.Sprintf("%s.json: key %q is declared absent on this host (%s) but was seen: the reason no longer holds", file, p, r.why))
			case partOnly || r.kind == absentHere:
			case (r.need == both || r.need == presentOnly) && !present:
				c.problems = append(c.problems, fmt.Sprintf("%s.json: key %q (sometimes: %s) was never seen present (%s)", file, p, r.why, state))
			case (r.need == both || r.need == absentOnly) && !absentSeen:
				c.problems = append(c.problems, fmt.Sprintf("%s.json: optional key %q (sometimes: %s) was %s: no proof it can be absent here; make it required or give the reason", file, p, r.why, state))
			}
		}
		var ss *shape
		if sm != nil {
			ss = sm.shape
		}
		c.walk(file, p, ss, gm.shape, partOnly)
	}
}

// unused lists entries of optionalKeys that no optional key used.
func (c *optionalCheck) unused() []string {
	var out []string
	for k := range optionalKeys {
		if !c.used[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
