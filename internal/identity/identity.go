// Package identity says which program instances are the same program over
// time. A program's identity is its full name, type, where it is attached
// and who runs it; it follows the program across reloads, and a new
// version is the same identity reappearing with another tag. History,
// new_version events, regression detection and findings all key on it;
// raw series stay per instance.
//
// Two programs loaded at the same time never share an identity: the
// second of two otherwise equal ones (two copies of one tool) takes slot 2
// (Slots).
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/collectors"
)

// Identity is what makes a program the same program across reloads.
type Identity struct {
	Type string `json:"type"`
	Name string `json:"name"` // the full name
	// Attach is where it is attached, each attach point as "TYPE TARGET"
	// with devices by name, sorted, joined by ", "; empty when it is
	// attached nowhere the kernel tells (a test-run program, a bpftrace
	// probe whose holder is gone).
	Attach string `json:"attach,omitempty"`
	// Runner is who runs it: "k8s NAMESPACE/KIND/NAME/CONTAINER" (a pod's
	// workload), "unit NAME.service", "container ID", the holder's
	// command, or "pin PATH" for a program only a pin holds.
	Runner string `json:"runner,omitempty"`
	// Slot tells apart programs loaded at the same time that are equal in
	// everything else: 0 for the first, 2 for the second, and so on.
	Slot int `json:"slot,omitempty"`
}

// Of is the identity of a program with metadata m, whose owners and attach
// points have been read; selfPID is the daemon's, never a runner of another
// process's program. The slot is left 0: Slots assigns it.
func Of(m collectors.Meta, selfPID int) Identity {
	return Identity{Type: m.Type, Name: m.Name, Attach: Attach(m.Attach), Runner: RunnerOf(m, selfPID)}
}

// RunnerOf is who runs a program, from the facts that survive a reload
// first, so that the next version of a program gets the same runner:
//
//   - loaded while the daemon watched (m.Loader, from the kernel's load
//     record), by another process: the loader's Kubernetes workload and
//     container (PodRunner), else its systemd .service, else its
//     container by ids, else the pin that keeps the program, else the
//     loader's command. A loader that exited (bpftool prog load, a
//     oneshot unit) still counts: it is a fact of the moment of loading.
//   - loader unknown (loaded before the daemon started, its record lost):
//     the pin that keeps it, else its holders (Runner).
//
// Whoever happens to hold a program later (a bpftool prog show, a test-run
// driver, another agent) never outranks its loader or its pin.
func RunnerOf(m collectors.Meta, selfPID int) string {
	pin := m.Pin
	for _, o := range m.Owners {
		if pin == "" && o.PID == 0 {
			pin = o.Pin
		}
	}
	if lo := m.Loader; lo != nil && lo.PID != 0 && lo.PID != selfPID {
		switch {
		case lo.Pod != nil:
			return PodRunner(lo.Pod)
		case strings.HasSuffix(lo.Unit, ".service"):
			return "unit " + lo.Unit
		case lo.Container != "":
			return "container " + lo.Container
		case pin != "":
			return "pin " + pin
		case lo.Comm != "":
			return lo.Comm
		}
	}
	if pin != "" {
		return "pin " + pin
	}
	return Runner(m.Owners, selfPID)
}

// PodRunner is the runner of a program run from a Kubernetes pod's
// container: "k8s NAMESPACE/KIND/NAME/CONTAINER", the pod's workload and
// the container's name. A container restart (new container id), a pod made
// again (new uid, new random name) and a rollout (new pod-template-hash)
// all keep it, so the next program there is the next version of the last;
// container ids and pod uids, which change with each, are left out.
func PodRunner(p *collectors.Pod) string {
	return "k8s " + p.Namespace + "/" + p.Workload + "/" + p.Container
}

// containerRunnerPrefix begins the runner of a pod's container named by
// ids, "container pod UID/ID" (collectors.UnitAndContainer).
const containerRunnerPrefix = "container pod "

// PodUIDOf returns the pod uid of a runner naming a pod's container by ids
// ("container pod UID/ID"), as runners were made before pods had names
// and still are while the CRI socket does not answer.
func PodUIDOf(runner string) (string, bool) {
	rest, ok := strings.CutPrefix(runner, containerRunnerPrefix)
	if !ok {
		return "", false
	}
	uid, _, _ := strings.Cut(rest, "/")
	return uid, uid != ""
}

// ContinuesPod reports whether cur, the identity of a program run from a
// container of the pod with uid podUID and named by its workload
// (PodRunner), carries on old, an identity whose runner named a container
// of that same pod by ids: the same type, name, attach points and slot.
// That pod's uid is all that ties the two, so an identity settled by ids
// is carried on while its pod lives (its containers restarted after the
// daemon began naming pods, or the socket answered again), not once the
// pod was made again under a new uid.
func ContinuesPod(old, cur Identity, podUID string) bool {
	uid, ok := PodUIDOf(old.Runner)
	return ok && uid == podUID && strings.HasPrefix(cur.Runner, "k8s ") && old.Type == cur.Type && old.Name == cur.Name &&
		old.Attach == cur.Attach && old.Slot == cur.Slot
}

// ifindexName matches "ifindex 6 (bv1)", the device part of a target.
var ifindexName = regexp.MustCompile(`ifindex \d+ \(([^)]*)\)`)

// Attach describes attach points for an identity: by device name, not by
// ifindex, which a device gets anew when it is made again. A device in the
// daemon's network namespace is "dev NAME", as identities stored before
// namespaces were told apart say; one in another namespace is named by
// the namespace first (AttachPoint.NetnsTarget), a pod's by its workload,
// "pod ns-a/Deployment/web eth0" (NetnsKey): a pod made again by its
// Deployment has another name, and the same identity.
func Attach(aps []collectors.AttachPoint) string { return attach(aps, true) }

// Where is Attach as people read it: a pod's device by the pod's name,
// "pod ns-a/web-7d9f8b6c5-x2k4p eth0" (progs' WHERE).
func Where(aps []collectors.AttachPoint) string { return attach(aps, false) }

func attach(aps []collectors.AttachPoint, key bool) string {
	var parts []string
	for _, ap := range aps {
		target := ifindexName.ReplaceAllString(ap.Target, "dev $1")
		if ap.Netns != "" {
			if key && ap.NetnsKey != "" {
				ap.Netns = ap.NetnsKey
			}
			target = ap.NetnsTarget()
		}
		s := strings.TrimSpace(ap.Type + " " + target)
		if !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// Runner is who runs a program with these owners: a systemd service, else
// a container, else the command of the lowest pid (the loader, where a
// tool's children inherit its fds), else a pin. The daemon itself (selfPID)
// is no runner here: its brief fds must not make it one.
func Runner(owners []collectors.Owner, selfPID int) string {
	var comm, pin string
	lowest := 0
	for _, o := range owners {
		switch {
		case o.PID == 0:
			if pin == "" {
				pin = o.Pin
			}
			continue
		case o.PID == selfPID:
			continue
		case o.Pod != nil:
			return PodRunner(o.Pod)
		case strings.HasSuffix(o.Unit, ".service"):
			return "unit " + o.Unit
		case o.Container != "":
			return "container " + o.Container
		}
		if lowest == 0 || o.PID < lowest {
			lowest, comm = o.PID, o.Comm
		}
	}
	switch {
	case comm != "":
		return comm
	case pin != "":
		return "pin " + pin
	}
	return ""
}

// Key is the identity as one string, what the store and the detector key
// on: "TYPE/NAME at ATTACH by RUNNER #SLOT", parts absent where empty.
func (i Identity) Key() string {
	var b strings.Builder
	b.WriteString(i.Type + "/" + i.Name)
	if i.Attach != "" {
		b.WriteString(" at " + i.Attach)
	}
	if i.Runner != "" {
		b.WriteString(" by " + i.Runner)
	}
	if i.Slot > 0 {
		b.WriteString(" #" + strconv.Itoa(i.Slot))
	}
	return b.String()
}

// ID is a short stable name of the identity a user can type (like a git
// short hash): the first 8 hex digits of its key's SHA-256.
func (i Identity) ID() string { return ShortID(i.Key()) }

// ShortID is the ID of an identity's key, and "" for no key (a program
// whose identity is not settled yet).
func ShortID(key string) string {
	if key == "" {
		return ""
	}
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:4])
}

// Base is the identity without its slot.
func (i Identity) Base() Identity { i.Slot = 0; return i }

// Continues reports whether a program of identity cur carries on the
// history of old, an identity stored before full names and identities
// were kept (old is derived from that record's metadata): the same type
// and slot, a name equal to cur's or cur's cut to the kernel's 15
// characters, and the same attach point and runner. A record that did
// not know them continues nothing: a cut name such as tracepoint__sys
// names every libbpf-tools syscall program, and each would have been a
// false new version of it.
func Continues(old, cur Identity) bool {
	if old.Type != cur.Type || old.Slot != cur.Slot {
		return false
	}
	nameOK := old.Name == cur.Name ||
		(len(old.Name) == collectors.KernelNameLen && strings.HasPrefix(cur.Name, old.Name))
	return nameOK && old.Attach == cur.Attach && old.Runner == cur.Runner
}

// Slots hands out slots among programs loaded at the same time whose
// identities are otherwise equal. The zero value is ready to use.
type Slots struct {
	used map[string][]int // by base key, the slots taken
}

// Take gives id the lowest free slot (0, then 2, 3, ...) and marks it
// taken until Free.
func (s *Slots) Take(id Identity) Identity {
	return s.TakePreferring(id, nil)
}

// preferReach is how many slots past those taken TakePreferring looks
// for a preferred one: copies of a program loaded at once beyond that are
// rare.
const preferReach = 16

// TakePreferring gives id the first free slot that prefer accepts, else
// the lowest free one, and marks it taken until Free. The sampler prefers
// the slot whose last version had the program's code: two copies that
// differ in their code keep their histories whatever order they are
// loaded in again. Copies alike in everything take slots by load order.
func (s *Slots) TakePreferring(id Identity, prefer func(Identity) bool) Identity {
	if s.used == nil {
		s.used = map[string][]int{}
	}
	id.Slot = 0
	k := id.Key()
	taken := s.used[k]
	lowest, preferred := -1, -1
	// The slots a copy may have had: those taken now and a few more.
	for slot := 0; slot <= len(taken)+preferReach; slot = max(slot+1, 2) {
		if slices.Contains(taken, slot) {
			continue
		}
		if lowest < 0 {
			lowest = slot
			if prefer == nil {
				break
			}
		}
		if c := id; prefer != nil {
			c.Slot = slot
			if prefer(c) {
				preferred = slot
				break
			}
		}
	}
	id.Slot = lowest
	if preferred >= 0 {
		id.Slot = preferred
	}
	s.used[k] = append(s.used[k], id.Slot)
	return id
}

// Claim marks id's own slot taken, as a program that had it before the
// daemon restarted keeps it; false, taking nothing, where another program
// holds it now.
func (s *Slots) Claim(id Identity) bool {
	if s.used == nil {
		s.used = map[string][]int{}
	}
	k := id.Base().Key()
	if slices.Contains(s.used[k], id.Slot) {
		return false
	}
	s.used[k] = append(s.used[k], id.Slot)
	return true
}

// Free gives id's slot back, when its program is unloaded.
func (s *Slots) Free(id Identity) {
	k := id.Base().Key()
	if i := slices.Index(s.used[k], id.Slot); i >= 0 {
		s.used[k] = slices.Delete(s.used[k], i, i+1)
		if len(s.used[k]) == 0 {
			delete(s.used, k)
		}
	}
}

// Parse reads a key Key made back into its identity. Program names have
// no spaces, so the name ends at the first; the slot is a trailing " #N",
// the runner follows the last " by ", the attach points the first " at ".
func Parse(key string) (Identity, bool) {
	var id Identity
	head, rest, _ := strings.Cut(key, " ")
	typ, name, ok := strings.Cut(head, "/")
	if !ok || typ == "" || name == "" {
		return Identity{}, false
	}
	id.Type, id.Name = typ, name
	if i := strings.LastIndex(rest, " #"); i >= 0 || strings.HasPrefix(rest, "#") {
		n, err := strconv.Atoi(strings.TrimPrefix(rest[i+1:], "#"))
		if err != nil || n < 2 {
			return Identity{}, false
		}
		id.Slot, rest = n, rest[:max(i, 0)]
	}
	rest = " " + rest
	if i := strings.LastIndex(rest, " by "); i >= 0 {
		id.Runner, rest = rest[i+4:], rest[:i]
	}
	if a, ok := strings.CutPrefix(rest, " at "); ok {
		id.Attach, rest = a, ""
	}
	if strings.TrimSpace(rest) != "" {
		return Identity{}, false
	}
	return id, true
}
