package query

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/daemon/errs"
	"github.com/bpfperf/bpfperf/daemon/sampler"
	"github.com/bpfperf/bpfperf/internal/identity"
	"github.com/bpfperf/bpfperf/store"
)

// Instance is one resolved program instance: its store record and, when
// loaded now, the sampler's live view.
type Instance struct {
	Rec  store.Program
	Live *sampler.Program // nil when not loaded; read it inside Sampler.Read
	// Ident is its identity key as of resolving ("" before it is
	// settled): the live program's, which may be settled before the
	// record that says so is written (the tick's write comes after), else
	// the record's. Read then, under the sampler's lock, so that what
	// follows needs no lock for it.
	Ident string
}

// instanceOf is rec resolved: with its live program where that instance
// is loaded now, as v sees it.
func instanceOf(v sampler.View, rec store.Program) Instance {
	in := Instance{Rec: rec, Ident: rec.Identity}
	if p := v.Live(rec.Key); p != nil {
		in.Live = p
		if k := p.IdentityKey(); k != "" {
			in.Ident = k
		}
	}
	return in
}

// Resolve finds the instances a user's PROG names: a numeric id, a name
// (full, or the kernel's cut name), name@tag, or an identity (its short id
// or its key). Loaded instances come first, then the rest newest first.
func (q *Query) Resolve(ref string) ([]Instance, error) {
	recs, err := q.Store.Programs()
	if err != nil && q.Store.Damaged() == "" {
		return nil, err
	}
	if err != nil {
		// A damaged store cannot list programs; the loaded ones still
		// have live figures.
		recs = q.liveRecords()
	}
	var out []Instance
	q.Sampler.Read(func(v sampler.View) {
		out = matching(v, recs, ref, q.Boot)
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%w %q: no program with that id, name, name@tag or identity", errs.UnknownProgram, ref)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Live != nil) != (out[j].Live != nil) {
			return out[i].Live != nil
		}
		return out[i].Rec.FirstSeen.After(out[j].Rec.FirstSeen)
	})
	return out, nil
}

// matching are the instances among recs that ref names, as v sees them.
func matching(v sampler.View, recs []store.Program, ref string, boot uint32) []Instance {
	name, tag, hasTag := strings.Cut(ref, "@")
	id, idErr := strconv.ParseUint(ref, 10, 32)
	var out []Instance
	for _, rec := range recs {
		inst := instanceOf(v, rec)
		// An identity id may be all digits, like a program id: both
		// are tried.
		match := inst.Ident != "" && (inst.Ident == ref || identity.ShortID(inst.Ident) == ref)
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

// ResolveOne picks the single instance PROG means: the loaded one, or if
// none is loaded the newest. Two loaded programs sharing a name are
// ambiguous.
func (q *Query) ResolveOne(ref string) (Instance, error) {
	insts, err := q.Resolve(ref)
	if err != nil {
		return Instance{}, err
	}
	if len(insts) > 1 && insts[1].Live != nil {
		return Instance{}, ambiguous(ref, insts)
	}
	return insts[0], nil
}

// ambiguous is the error for a PROG that names several loaded programs:
// their ids and identities, to pick one by.
func ambiguous(ref string, insts []Instance) error {
	var ids []string
	for _, in := range insts {
		if in.Live == nil {
			continue
		}
		if k := in.Ident; k != "" {
			ids = append(ids, fmt.Sprintf("%d (identity %s: %s)", in.Rec.ID, identity.ShortID(k), k))
		} else {
			ids = append(ids, fmt.Sprintf("%d (tag %s)", in.Rec.ID, in.Rec.Tag))
		}
	}
	return fmt.Errorf("%w %q: loaded as ids %s; use an id or an identity", errs.AmbiguousProgram, ref, strings.Join(ids, ", "))
}

// SameProgram widens instances of one identity to every instance of it,
// reloads and records from before identities were kept included, and for a
// workload's identity in a pod the instances its pods had under container
// ids (identity.ContinuesPod): the history of "this program". Instances of
// several identities (a name that several programs share), or of none yet,
// are returned as they are.
func (q *Query) SameProgram(insts []Instance) ([]Instance, error) {
	key := ""
	for _, in := range insts {
		if in.Ident == "" || (key != "" && in.Ident != key) {
			return insts, nil
		}
		key = in.Ident
	}
	cur, ok := identity.Parse(key)
	if !ok {
		return insts, nil
	}
	recs, err := q.Store.Programs()
	if err != nil {
		return insts, nil // a damaged store: what resolve found
	}
	var out []Instance
	q.Sampler.Read(func(v sampler.View) {
		all := make([]Instance, len(recs))
		pods := map[string]bool{} // uids of the pods the identity's instances ran in
		for i, rec := range recs {
			all[i] = instanceOf(v, rec)
			if all[i].Ident == key {
				if uid := podUIDOf(all[i]); uid != "" {
					pods[uid] = true
				}
			}
		}
		for _, in := range all {
			match := in.Ident == key
			if !match && in.Ident == "" && in.Live == nil {
				if old, ok := sampler.LegacyIdentityOf(in.Rec); ok && identity.Continues(old, cur) {
					match = true
				}
			}
			if !match && in.Ident != "" && in.Live == nil && len(pods) > 0 {
				old, ok := identity.Parse(in.Ident)
				uid, byIDs := identity.PodUIDOf(old.Runner)
				match = ok && byIDs && pods[uid] && identity.ContinuesPod(old, cur, uid)
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

// podUIDOf is the uid of the pod that ran in, "" for none known: from its
// live metadata, else its record's. Called inside Sampler.Read.
func podUIDOf(in Instance) string {
	m := &collectors.Meta{}
	if in.Live != nil {
		m = in.Live.Meta()
	} else if len(in.Rec.Meta) == 0 || json.Unmarshal(in.Rec.Meta, m) != nil {
		return ""
	}
	if p := m.RunPod(); p != nil {
		return p.UID
	}
	return ""
}

// overlap reports whether two instances were loaded at the same time, in
// which case a name does not pick one series.
func overlap(insts []Instance) bool {
	live := 0
	for _, in := range insts {
		if in.Rec.Loaded() {
			live++
		}
	}
	return live > 1
}

// liveRecords are the loaded programs as the store records them.
func (q *Query) liveRecords() (recs []store.Program) {
	q.Sampler.Read(func(v sampler.View) { recs = v.Records() })
	return recs
}

// identityKeys are the distinct settled identities among insts, as short
// ids, sorted.
func identityKeys(insts []Instance) []string {
	var keys []string
	for _, in := range insts {
		if in.Ident != "" && !slices.Contains(keys, identity.ShortID(in.Ident)) {
			keys = append(keys, identity.ShortID(in.Ident))
		}
	}
	slices.Sort(keys)
	return keys
}
