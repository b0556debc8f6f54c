package daemon

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/bpfperf/bpfperf/store"
)

// instance is one resolved program instance: its store record and, when
// loaded now, the sampler's live view.
type instance struct {
	rec  store.Program
	live *program
}

// resolve finds the instances a user's PROG names: a numeric id, a name, or
// name@tag. Loaded instances come first, then the rest newest first.
func (d *Daemon) resolve(ref string) ([]instance, error) {
	recs, err := d.store.Programs()
	if err != nil && d.store.Damaged() == "" {
		return nil, err
	}
	if err != nil {
		// A damaged store cannot list programs; the loaded ones still
		// have live figures.
		recs = d.liveRecords()
	}
	name, tag, hasTag := strings.Cut(ref, "@")
	id, idErr := strconv.ParseUint(ref, 10, 32)
	var out []instance
	d.sampler.mu.RLock()
	for _, rec := range recs {
		match := false
		switch {
		case idErr == nil:
			match = rec.ID == uint32(id) && rec.Key.Boot == d.boot
		case hasTag:
			match = rec.Name == name && rec.Tag == tag
		default:
			match = rec.Name == name
		}
		if !match {
			continue
		}
		inst := instance{rec: rec}
		if p := d.sampler.progs[rec.ID]; p != nil && p.key == rec.Key {
			inst.live = p
		}
		out = append(out, inst)
	}
	d.sampler.mu.RUnlock()
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q: no program with that id, name or name@tag", ErrUnknownProgram, ref)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].live != nil) != (out[j].live != nil) {
			return out[i].live != nil
		}
		return out[i].rec.FirstSeen.After(out[j].rec.FirstSeen)
	})
	return out, nil
}

// resolveOne picks the single instance PROG means: the loaded one, or if
// none is loaded the newest. Two loaded programs sharing a name are
// ambiguous.
func (d *Daemon) resolveOne(ref string) (instance, error) {
	insts, err := d.resolve(ref)
	if err != nil {
		return instance{}, err
	}
	if len(insts) > 1 && insts[1].live != nil {
		return instance{}, ambiguous(ref, insts)
	}
	return insts[0], nil
}

func ambiguous(ref string, insts []instance) error {
	var ids []string
	for _, in := range insts {
		if in.live != nil {
			ids = append(ids, fmt.Sprintf("%d (tag %s)", in.rec.ID, in.rec.Tag))
		}
	}
	return fmt.Errorf("%w %q: loaded as ids %s; use an id or name@tag", ErrAmbiguousProgram, ref, strings.Join(ids, ", "))
}

// overlap reports whether two instances were loaded at the same time, in
// which case a name does not pick one series.
func overlap(insts []instance) bool {
	live := 0
	for _, in := range insts {
		if in.rec.Loaded() {
			live++
		}
	}
	return live > 1
}

// liveRecords are the loaded programs as the store would record them.
func (d *Daemon) liveRecords() []store.Program {
	d.sampler.mu.RLock()
	defer d.sampler.mu.RUnlock()
	var recs []store.Program
	for _, p := range d.sampler.progs {
		if rec, err := d.sampler.record(p, time.Time{}); err == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}
