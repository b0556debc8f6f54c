package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/bpfperf/bpfperf/api"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/regress"
	"github.com/bpfperf/bpfperf/profile"
	"github.com/bpfperf/bpfperf/store"
)

// Regression detection: each tick, every program key's newest instance
// adds one interval's ns/run and runs/s to a tracker; when a key has run a
// new version for a window, the tracker compares it with the window before
// the reload, and a finding is stored as an event with its evidence and
// the profile diff's top changes.

// Defaults of the --regressions.* flags.
const (
	DefaultRegressionWindow    = regress.DefaultWindow
	DefaultRegressionMinChange = regress.DefaultMinChange
	DefaultRegressionAlpha     = regress.DefaultAlpha
	// minRunsPerInterval: an interval with fewer runs says little about
	// ns/run (one slow run is its whole figure).
	minRunsPerInterval = 10
	// topChanges is how many programs, functions and lines an explanation
	// keeps, each.
	topChanges = 5
)

// intervalSample is what the detector compares of one interval, from
// cumulative readings a and b taken elapsed apart, at: its ns/run and
// runs/s (api's rate maths). ok is false when api.DeltaBetween has no delta
// (no time passed, counters went backwards) or the interval had fewer than
// minRunsPerInterval runs.
func intervalSample(at time.Time, a, b api.Counters, elapsed time.Duration) (regress.Sample, bool) {
	d, ok := api.DeltaBetween(a, b, elapsed)
	if !ok || d.Runs < minRunsPerInterval {
		return regress.Sample{}, false
	}
	ns, _ := d.AvgNsPerRun()
	rps, _ := d.RunsPerSec()
	return regress.Sample{At: at, NsPerRun: ns, RunsPerSec: rps}, true
}

func validateRegressions(c *regress.Config) error {
	if c.Window == 0 {
		return nil
	}
	if c.Window < 0 {
		return fmt.Errorf("%w: --regressions.window %v is negative", ErrBadConfig, c.Window)
	}
	if c.MinChange <= 0 || c.MinChange >= 10 {
		return fmt.Errorf("%w: --regressions.min-change %g%% is outside 0..1000%%", ErrBadConfig, 100*c.MinChange)
	}
	if c.ShiftWindow < 0 {
		return fmt.Errorf("%w: --regressions.shift-window %v is negative", ErrBadConfig, c.ShiftWindow)
	}
	if c.Alpha <= 0 || c.Alpha >= 1 {
		return fmt.Errorf("%w: --regressions.alpha %g is outside 0..1", ErrBadConfig, c.Alpha)
	}
	if c.LoadBand == 0 {
		c.LoadBand = regress.DefaultLoadBand
	}
	if c.MinSamples == 0 {
		c.MinSamples = regress.DefaultMinSamples
	}
	return nil
}

// detector is the daemon's regression detection state, used by the
// sampling loop only.
type detector struct {
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
}

// detect feeds this tick's intervals to the tracker and stores findings.
// Called from the sampling loop after each tick.
func (d *Daemon) detect(now time.Time) {
	if d.cfg.Regressions.Window <= 0 {
		return
	}
	if d.detector == nil {
		d.detector = &detector{tracker: regress.NewTracker(d.cfg.Regressions), lastForget: now}
	}
	var found []foundIn
	d.sampler.Read(func(v sampler.View) { found = d.detector.observe(v, now) })
	if now.Sub(d.detector.lastForget) > d.cfg.Regressions.Window {
		d.detector.tracker.Forget(now.Add(-2 * d.cfg.Regressions.Window))
		d.detector.lastForget = now
		d.detector.built = false // Seen again what Forget dropped
	}
	for _, in := range found {
		f := in.finding
		if f.Kind == "" {
			if f.Undecided != "" {
				d.cfg.Logger.Info("new version not compared", "program", f.Key, "tag", f.NewTag, "why", f.Undecided, "intervals_before", f.NBefore, "intervals_after", f.NAfter)
			}
			continue
		}
		if err := d.storeFinding(now, in); err != nil {
			d.cfg.Logger.Warn("store regression finding", "err", err)
		}
	}
}

// observe feeds the tracker the intervals of the tick v shows.
func (dt *detector) observe(v sampler.View, now time.Time) []foundIn {
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
	// idle programs this loop is empty.
	var found []foundIn
	for _, p := range v.Moved() {
		key := p.IdentityKey()
		if key == "" || dt.newest[key] != p {
			continue
		}
		cur, curAt := p.Latest()
		prev, prevAt, _ := p.Previous()
		smp, ok := intervalSample(now, sampleCounters(prev), sampleCounters(cur), curAt.Sub(prevAt))
		if !ok {
			continue
		}
		m := p.Meta()
		if f := tr.Observe(key, m.Tag, smp); f != nil {
			found = append(found, foundIn{finding: f, name: m.Name, typ: m.Type, key: key, id: m.ID})
		}
	}
	return found
}

// storeFinding explains a finding from the profiles and stores it as an
// event.
func (d *Daemon) storeFinding(now time.Time, in foundIn) error {
	f := in.finding
	r := api.Regression{
		Kind: f.Kind, Time: now, Program: in.name, Type: in.typ, Identity: in.key, ProgID: in.id,
		OldTag: f.OldTag, NewTag: f.NewTag, Windows: f.Windows, Comparison: f.Comparison,
	}
	r.ID = findingID(r)
	r.Explanation = d.explain(r.Program, r.BeforeFrom, r.BeforeTo, r.AfterFrom, r.AfterTo)
	ev, err := json.Marshal(r)
	if err != nil {
		return err
	}
	detail := fmt.Sprintf("%s: ns/run x%.2f [%.2f, %.2f] vs tag %s, p=%.2g, %d+%d intervals", r.ID, r.Ratio, r.RatioLo, r.RatioHi, r.OldTag, r.P, r.NBefore, r.NAfter)
	d.cfg.Logger.Info("regression detection", "kind", r.Kind, "program", r.Program, "detail", detail)
	d.metrics.Found(r.Kind, r.Type, r.Program)
	return d.store.WriteTick(store.Tick{Time: now, Events: []store.Event{{
		Time: now, Kind: r.Kind, ID: r.ProgID, Name: r.Program, Tag: r.NewTag, Identity: r.Identity, Detail: detail, Evidence: ev,
	}}})
}

// findingID is a short stable id users type: a hash of what was found.
func findingID(r api.Regression) string {
	h := sha256.Sum256(fmt.Appendf(nil, "%s %s %s %d", r.Identity, r.OldTag, r.NewTag, r.Changed.UnixNano()))
	return hex.EncodeToString(h[:4])
}

// explain compares the continuous profiles of the two windows: programs
// host-wide, prog's functions and lines.
func (d *Daemon) explain(prog string, bFrom, bTo, aFrom, aTo time.Time) api.Explanation {
	if d.cfg.Profile.Every <= 0 {
		return api.Explanation{Off: "continuous profiling is off (--profile.every 0)"}
	}
	before, nb, err := d.mergedProfiles(bFrom, bTo)
	after, na, err2 := d.mergedProfiles(aFrom, aTo)
	ex := api.Explanation{BeforeProfiles: nb, AfterProfiles: na}
	if err = errors.Join(err, err2); err != nil {
		ex.Off = "no profile diff: " + err.Error()
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

// mergedProfiles merges the continuous windows that lie wholly in
// [from, to]: one that straddles a reload would blur the two sides.
func (d *Daemon) mergedProfiles(from, to time.Time) (*pprof.Profile, int, error) {
	list, err := d.store.ListProfiles(from, to)
	if err != nil {
		return nil, 0, err
	}
	kept := list[:0]
	for _, p := range list {
		if p.Kind == store.ProfileContinuous && !p.Start.Before(from) && !p.End().After(to) {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return nil, 0, fmt.Errorf("%w between %s and %s", profile.ErrNoProfiles, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if len(kept) > maxMergeProfiles {
		kept = kept[len(kept)-maxMergeProfiles:]
	}
	p, err := d.mergeStored(kept, from, to)
	return p, len(kept), err
}
