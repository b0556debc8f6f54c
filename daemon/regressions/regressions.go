// Package regressions is the daemon's regression detection room: each
// tick, every program identity's newest instance adds one interval's
// ns/run and runs/s to a tracker (internal/regress); when an identity has
// run a new version for a window, the tracker compares it with the window
// before the reload, and a finding is stored as an event with its
// evidence and the profile diff's top changes.
package regressions

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/profiling"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// Defaults of the --regressions.* flags.
const (
	DefaultWindow    = regress.DefaultWindow
	DefaultMinChange = regress.DefaultMinChange
	DefaultAlpha     = regress.DefaultAlpha
	// minRunsPerInterval: an interval with fewer runs says little about
	// ns/run (one slow run is its whole figure).
	minRunsPerInterval = 10
	// topChanges is how many programs, functions and lines an explanation
	// keeps, each.
	topChanges = 5
)

// IntervalSample is what the detector compares of one interval, from
// cumulative readings a and b taken elapsed apart, at: its ns/run and
// runs/s (api's rate maths). ok is false when api.DeltaBetween has no delta
// (no time passed, counters went backwards) or the interval had fewer than
// minRunsPerInterval runs.
func IntervalSample(at time.Time, a, b api.Counters, elapsed time.Duration) (regress.Sample, bool) {
	d, ok := api.DeltaBetween(a, b, elapsed)
	if !ok || d.Runs < minRunsPerInterval {
		return regress.Sample{}, false
	}
	ns, _ := d.AvgNsPerRun()
	rps, _ := d.RunsPerSec()
	return regress.Sample{At: at, NsPerRun: ns, RunsPerSec: rps}, true
}

// Validate checks the --regressions.* flags and fills defaults.
func Validate(c *regress.Config) error {
	if c.Window == 0 {
		return nil
	}
	if c.Window < 0 {
		return fmt.Errorf("%w: --regressions.window %v is negative", errs.BadConfig, c.Window)
	}
	if c.MinChange <= 0 || c.MinChange >= 10 {
		return fmt.Errorf("%w: --regressions.min-change %g%% is outside 0..1000%%", errs.BadConfig, 100*c.MinChange)
	}
	if c.ShiftWindow < 0 {
		return fmt.Errorf("%w: --regressions.shift-window %v is negative", errs.BadConfig, c.ShiftWindow)
	}
	if c.Alpha <= 0 || c.Alpha >= 1 {
		return fmt.Errorf("%w: --regressions.alpha %g is outside 0..1", errs.BadConfig, c.Alpha)
	}
	if c.LoadBand == 0 {
		c.LoadBand = regress.DefaultLoadBand
	}
	if c.MinSamples == 0 {
		c.MinSamples = regress.DefaultMinSamples
	}
	return nil
}

// Deps are what the detector reads and where its findings go.
type Deps struct {
	Sampler *sampler.Sampler
	Store   *store.DB
	Logger  *slog.Logger
	// ProfilesOn says continuous profiling runs, so a finding can be
	// explained by the profiles of its two windows.
	ProfilesOn bool
	// Found, if set, counts each finding (for /metrics).
	Found func(kind, typ, name string)
	// Timed, if set, says a latency window was open on an instance in an
	// interval (latency.TimedBetween): such an interval is left out, since
	// timing adds to each run's run time and must never read as a change.
	Timed func(key store.InstanceKey, from, to time.Time) bool
}

// Detector is the daemon's regression detection state, used by the
// sampling loop only.
type Detector struct {
	cfg        regress.Config
	deps       Deps
	tracker    *regress.Tracker
	lastForget time.Time
	// newest is each key's newest instance, rebuilt only when the
	// sampler's gen moves (a program came or went, owners were read):
	// built says it is current for gen.
	newest map[string]*sampler.Program
	gen    uint64
	built  bool
}

// foundIn is a finding and the program it is about, read under the
// sampler's lock.
type foundIn struct {
	finding        *regress.Finding
	name, typ, key string
	id             uint32
	loaded         time.Time           // when the kernel loaded the program (the new version of a reload)
	tail           *api.TailComparison // the p99 of the two versions' latency windows, where both have them
	by             string              // what decided it: "mean" or "p99"
}

// New makes a detector with cfg (a zero Window turns it off).
func New(cfg regress.Config, deps Deps) *Detector {
	return &Detector{cfg: cfg, deps: deps}
}

// Tick feeds this tick's intervals to the tracker and stores findings.
// Called from the sampling loop after each tick.
func (dt *Detector) Tick(now time.Time) {
	if dt.cfg.Window <= 0 {
		return
	}
	if dt.tracker == nil {
		dt.tracker, dt.lastForget = regress.NewTracker(dt.cfg), now
	}
	var found []foundIn
	dt.deps.Sampler.Read(func(v sampler.View) { found = dt.observe(v, now) })
	if now.Sub(dt.lastForget) > dt.cfg.Window {
		dt.tracker.Forget(now.Add(-2 * dt.cfg.Window))
		dt.lastForget = now
		dt.built = false // Seen again what Forget dropped
	}
	for _, in := range found {
		f := in.finding
		if f.OldTag != "" && f.OldTag != f.NewTag {
			endBeforeAtLoad(&f.Windows, in.loaded)
			// A new version (not a shift of one): its tail too, where
			// latency windows exist.
			tc, err := tail(dt.deps.Store, in.key, f.OldTag, f.NewTag, f.Windows)
			if err != nil {
				dt.deps.Logger.Warn("regression tail", "program", in.name, "err", err)
			}
			in.tail = tc
			f.Kind, in.by = byTail(f.Kind, tc, dt.cfg.MinChange)
		}
		if f.Kind == "" {
			switch {
			case f.Undecided != "":
				dt.deps.Logger.Info("new version not compared", "program", f.Key, "tag", f.NewTag, "why", f.Undecided, "intervals_before", f.NBefore, "intervals_after", f.NAfter, "tail", tailText(in.tail))
			case f.OldTag != "" && f.OldTag != f.NewTag:
				dt.deps.Logger.Info("new version: no change", "program", f.Key, "tag", f.NewTag, "ratio", f.Ratio, "p", f.P, "tail", tailText(in.tail))
			}
			continue
		}
		if err := dt.storeFinding(now, in); err != nil {
			dt.deps.Logger.Warn("store regression finding", "err", err)
		}
	}
}

// observe feeds the tracker the intervals of the tick v shows.
func (dt *Detector) observe(v sampler.View, now time.Time) []foundIn {
	tr := dt.tracker
	if !dt.built || dt.gen != v.Generation() {
		dt.newest = map[string]*sampler.Program{}
		for id, p := range v.Programs() {
			// A program is followed once its identity is settled (the
			// key of every series the detector keeps).
			if id == v.IterID() || p.Own() || p.IdentityKey() == "" {
				continue
			}
			if q := dt.newest[p.IdentityKey()]; q == nil || q.Meta().ID < p.Meta().ID {
				dt.newest[p.IdentityKey()] = p
			}
		}
		// Each key's current tag, so the tracker sees a reload (a new
		// newest instance, hence a rebuild) as a change of tag.
		for k, p := range dt.newest {
			tr.Seen(k, p.Meta().Tag, now)
		}
		dt.gen, dt.built = v.Generation(), true
	}
	// Only programs that ran can give an interval's sample: on a host of
	// idle programs this loop is empty. An interval a duty cycle carried at
	// the last on part's rates is that part again, not a sample of its
	// own: counted in each, one on part would weigh as many intervals.
	var found []foundIn
	if v.Carried() {
		return nil
	}
	for _, p := range v.Moved() {
		key := p.IdentityKey()
		if key == "" || dt.newest[key] != p {
			continue
		}
		cur, curAt := p.Latest()
		prev, prevAt, _ := p.Previous()
		smp, ok := IntervalSample(now, sampler.Counters(prev), sampler.Counters(cur), curAt.Sub(prevAt))
		if !ok || (dt.deps.Timed != nil && dt.deps.Timed(p.Key(), prevAt, curAt)) {
			continue
		}
		m := p.Meta()
		if f := tr.Observe(key, m.Tag, smp); f != nil {
			found = append(found, foundIn{finding: f, name: m.Name, typ: m.Type, key: key, id: m.ID, loaded: m.LoadedAt})
		}
	}
	return found
}

// endBeforeAtLoad ends a reload's before window at the new version's
// load, where the kernel dates that inside the window. The tracker dates
// the change at the sweep that followed the new version under the old
// one's identity: a tick or more after its load, more while the identity
// settles. The new version runs in between, and a profile window or
// latency window that ended there was counted as the old version's (a
// new line of the new version showed in the before profile: CI, issue
// 46). The ns/run intervals need no cut: the tracker takes the old tag's
// own. [BeforeTo, AfterFrom) is then in neither window.
func endBeforeAtLoad(w *api.Windows, loaded time.Time) {
	if loaded.After(w.BeforeFrom) && loaded.Before(w.BeforeTo) {
		w.BeforeTo = loaded
	}
}

// storeFinding explains a finding from the profiles and stores it as an
// event.
func (dt *Detector) storeFinding(now time.Time, in foundIn) error {
	f := in.finding
	r := api.Regression{
		Kind: f.Kind, Time: now, Program: in.name, Type: in.typ, Identity: in.key, ProgID: in.id,
		OldTag: f.OldTag, NewTag: f.NewTag, Windows: f.Windows, Comparison: f.Comparison, Tail: in.tail, By: in.by,
	}
	r.ID = FindingID(r)
	r.Explanation = dt.explain(r.Program, r.BeforeFrom, r.BeforeTo, r.AfterFrom, r.AfterTo)
	ev, err := json.Marshal(r)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("%s: ns/run x%.2f [%.2f, %.2f] vs tag %s, p=%.2g, %d+%d intervals", r.ID, r.Ratio, r.RatioLo, r.RatioHi, r.OldTag, r.P, r.NBefore, r.NAfter)
	if tc := r.Tail; tc != nil {
		detail += fmt.Sprintf("; p99 x%.2f (%.0f -> %.0f ns, %d+%d latency windows)", tc.Ratio, tc.BeforeP99Ns, tc.AfterP99Ns, tc.WindowsBefore, tc.WindowsAfter)
	}
	if r.By == "p99" {
		detail += "; decided by p99"
	}
	dt.deps.Logger.Info("regression detection", "kind", r.Kind, "program", r.Program, "detail", detail)
	if dt.deps.Found != nil {
		dt.deps.Found(r.Kind, r.Type, r.Program)
	}
	return dt.deps.Store.WriteTick(store.Tick{Time: now, Events: []store.Event{{
		Time: now, Kind: r.Kind, ID: r.ProgID, Name: r.Program, Tag: r.NewTag, Identity: r.Identity, Detail: detail, Evidence: ev,
	}}})
}

// FindingID is a short stable id users type: a hash of what was found.
func FindingID(r api.Regression) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s %s %s %d", r.Identity, r.OldTag, r.NewTag, r.Changed.UnixNano()))
	return hex.EncodeToString(h[:4])
}

// explain compares the continuous profiles of the two windows: programs
// host-wide, prog's functions and lines.
func (dt *Detector) explain(prog string, bFrom, bTo, aFrom, aTo time.Time) api.Explanation {
	if !dt.deps.ProfilesOn {
		return api.Explanation{Off: "continuous profiling is off (--profile.every 0)"}
	}
	before, nb, err := profiling.MergeWindows(dt.deps.Store, bFrom, bTo)
	after, na, err2 := profiling.MergeWindows(dt.deps.Store, aFrom, aTo)
	ex := api.Explanation{BeforeProfiles: nb, AfterProfiles: na}
	// One line for `regressions show`: errors.Join would put a newline
	// between the two sides.
	var missing []string
	for _, e := range []error{err, err2} {
		if e != nil {
			missing = append(missing, e.Error())
		}
	}
	if len(missing) > 0 {
		ex.Off = "no profile diff: " + strings.Join(missing, "; ")
		return ex
	}
	changes, err := profile.Changes(before, after, topChanges, prog)
	if err != nil {
		ex.Off = "no profile diff: " + err.Error()
		return ex
	}
	for _, c := range changes {
		ex.Top = append(ex.Top, api.Change(c))
	}
	return ex
}
