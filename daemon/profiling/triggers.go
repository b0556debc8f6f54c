package profiling

import (
	"errors"
	"fmt"
	"time"

	"github.com/bpfperf/bpfperf/profile"
)

// Triggered is what triggered each program's samples over some windows,
// and what the hooks around the programs cost in them.
type Triggered struct {
	ByProgram map[uint32][]profile.TriggerCost
	Hooks     map[string]profile.HookCost
	Windows   int           // continuous windows merged
	Start     time.Time     // the first window's start
	Duration  time.Duration // their length summed: CPU % is over this
}

// Triggers merges the continuous windows wholly in [from, to] (the newest
// MaxMerge) and says what triggered each program's samples in them. It
// fails with profile.ErrNoProfiles when there are none.
func (p *Profiling) Triggers(from, to time.Time) (Triggered, error) {
	pp, n, err := MergeWindows(p.store, from, to)
	if errors.Is(err, profile.ErrNoProfiles) {
		p.mu.Lock()
		on := p.prof != nil && p.cfg.Every > 0
		p.mu.Unlock()
		if !on {
			// No data rather than unavailable (404, not 503): stored
			// windows would still answer, and there are none.
			return Triggered{}, fmt.Errorf("%w: continuous profiling is off, and triggers come from its windows (--profile.every 0, or the daemon could not sample: see status)", err)
		}
		return Triggered{}, fmt.Errorf("%w: triggers come from the continuous profile windows, one every %v, and none lies wholly in the range yet", err, p.Every())
	}
	if err != nil {
		return Triggered{}, err
	}
	by, err := profile.ProgramTriggers(pp)
	if err != nil {
		return Triggered{}, err
	}
	hooks, _ := profile.HookCosts(pp) // fails as ProgramTriggers does
	return Triggered{ByProgram: by, Hooks: hooks, Windows: n, Start: time.Unix(0, pp.TimeNanos), Duration: time.Duration(pp.DurationNanos)}, nil
}

// LastHooks is what the hooks cost in the latest continuous window, and
// that window's length; nil before the first.
func (p *Profiling) LastHooks() (map[string]profile.HookCost, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hooks, p.cfg.Duration
}

// LastTriggers is what triggered each program's samples in the latest
// continuous window, and that window's length; nil before the first.
func (p *Profiling) LastTriggers() (map[uint32][]profile.TriggerCost, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.triggers, p.cfg.Duration
}
