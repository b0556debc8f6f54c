package httpapi

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// instance is one resolved program instance: its store record and, when
// loaded now, the sampler's live view.
type instance struct {
	rec  store.Program
	live *sampler.Program
	// ident is its identity key as of resolving ("" before it is
	// settled): the live program's, which may be settled before the
	// record that says so is written (the tick's write comes after), else
	// the record's. Read then, under the sampler's lock, so that what
	// follows needs no lock for it.
	ident string
}

// instanceOf is rec resolved: with its live program where that instance
// is loaded now, as v sees it.
func instanceOf(v sampler.View, rec store.Program) instance {
	in := instance{rec: rec, ident: rec.Identity}
	if p := v.Live(rec.Key); p != nil {
		in.live = p
		if k := p.IdentityKey(); k != "" {
			in.ident = k
		}
	}
	return in
}

// resolve finds the instances a user's PROG names: a numeric id, a name
// (full, or the kernel's cut name), name@tag, or an identity (its short id
// or its key). Loaded instances come first, then the rest newest first.
func (d *daemon) resolve(ref string) ([]instance, error) {
	recs, err := d.Store.Programs()
	if err != nil && d.Store.Damaged() == "" {
		return nil, err
	}
	if err != nil {
		// A damaged store cannot list programs; the loaded ones still
		// have live figures.
		recs = d.liveRecords()
	}
	var out []instance
	d.Sampler.Read(func(v sampler.View) {
		out = matching(v, recs, ref, d.Boot)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q: no program with that id, name, name@tag or identity", errs.UnknownProgram, ref)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].live != nil) != (out[j].live != nil) {
			return out[i].live != nil
		}
		return out[i].rec.FirstSeen.After(out[j].rec.FirstSeen)
	})
	return out, nil
}

// matching are the instances among recs that ref names, as v sees them.
func matching(v sampler.View, recs []store.Program, ref string, boot uint32) []instance {
	name, tag, hasTag := strings.Cut(ref, "@")
	id, idErr := strconv.ParseUint(ref, 10, 32)
	var out []instance
	for _, rec := range recs {
		inst := instanceOf(v, rec)
		// An identity id may be all digits, like a program id: both
		// are tried.
		match := inst.ident != "" && (inst.ident == ref || identity.ShortID(inst.ident) == ref)
		switch {
		case idErr == nil:
			match = match || (rec.ID == uint32(id) && rec.Key.Boot == boot)
		case hasTag:
			match = (rec.Name == name || rec.KernelName == name) && rec.Tag == tag
		default:
			match = match || rec.Name == name || rec.KernelName == name
		}
		if match {
			out = append(out, inst)
		}
	}
	return out
}

// resolveOne picks the single instance PROG means: the loaded one, or if
// none is loaded the newest. Two loaded programs sharing a name are
// ambiguous.
func (d *daemon) resolveOne(ref string) (instance, error) {
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
		if in.live == nil {
			continue
		}
		if k := in.ident; k != "" {
			ids = append(ids, fmt.Sprintf("%d (identity %s: %s)", in.rec.ID, identity.ShortID(k), k))
		} else {
			ids = append(ids, fmt.Sprintf("%d (tag %s)", in.rec.ID, in.rec.Tag))
		}
	}
	return fmt.Errorf("%w %q: loaded as ids %s; use an id or an identity", errs.AmbiguousProgram, ref, strings.Join(ids, ", "))
}

// sameProgram widens instances of one identity to every instance of it,
// reloads and records from before identities were kept included: the
// history of "this program". Instances of several identities (a name that
// several programs share), or of none yet, are returned as they are.
func (d *daemon) sameProgram(insts []instance) ([]instance, error) {
	key := ""
	for _, in := range insts {
		if in.ident == "" || (key != "" && in.ident != key) {
			return insts, nil
		}
		key = in.ident
	}
	cur, ok := identity.Parse(key)
	if !ok {
		return insts, nil
	}
	recs, err := d.Store.Programs()
	if err != nil {
		return insts, nil // a damaged store: what resolve found
	}
	var out []instance
	d.Sampler.Read(func(v sampler.View) {
		for _, rec := range recs {
			in := instanceOf(v, rec)
			match := in.ident == key
			if !match && in.ident == "" && in.live == nil {
				if old, ok := sampler.LegacyIdentityOf(rec); ok && identity.Continues(old, cur) {
					match = true
				}
			}
			if match {
				out = append(out, in)
			}
		}
	})
	if len(out) == 0 {
		return insts, nil
	}
	return out, nil
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

// liveRecords are the loaded programs as the store records them.
func (d *daemon) liveRecords() (recs []store.Program) {
	d.Sampler.Read(func(v sampler.View) { recs = v.Records() })
	return recs
}

// identityKeys are the distinct settled identities among insts, as short
// ids, sorted.
func identityKeys(insts []instance) []string {
	var keys []string
	for _, in := range insts {
		if in.ident != "" && !slices.Contains(keys, identity.ShortID(in.ident)) {
			keys = append(keys, identity.ShortID(in.ident))
		}
	}
	slices.Sort(keys)
	return keys
}
