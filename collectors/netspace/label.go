package netspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bpfperf/bpfperf/collectors"
	"github.com/bpfperf/bpfperf/internal/cgroupid"
)

// Label names a network namespace: "pod ns-a/web-0" for a Kubernetes
// pod's. It gets the namespace's inode and, where one of its processes is
// in a pod's cgroup, that cgroup's path (what the container runtime's
// metadata is looked up by; daemon/podnames). A zero Name says it cannot
// tell (yet, where Pending), and the names this package finds stand (see
// Scanner.label).
type Label func(ino uint64, podCgroup string) Name

// Name is how a Label names a namespace.
type Name struct {
	// Label is for people: "pod ns-a/web-7d9f8b6c5-x2k4p".
	Label string
	// Key is for identities, where Label would not outlive the namespace:
	// "pod ns-a/Deployment/web", the pod's workload, which the pod made
	// again under another name keeps; "" for Label (AttachPoint.NetnsKey).
	Key string
	// Pending says the pod's name is being asked for: the namespace is
	// named by the pod's uid meanwhile, and identities wait
	// (AttachPoint.NetnsPending).
	Pending bool
}

// label names ns: the hook's name, else the pod whose cgroup its
// processes are in ("pod <uid>": the cgroup tells the uid, not the
// name), else its name under /run/netns ("netns blue"), else its inode
// ("netns 4026532871"). A pod comes first because CNI bind-mounts a
// pod's namespace under /run/netns too, as cni-<uuid>.
func (s *Scanner) label(ns Namespace) Name {
	uid, cgroup := podOf(s.cfg.ProcRoot, ns.PIDs)
	var pending bool
	if s.cfg.Label != nil {
		n := s.cfg.Label(ns.Inode, cgroup)
		if n.Label != "" {
			return n
		}
		pending = n.Pending
	}
	if uid != "" {
		return Name{Label: "pod " + uid, Pending: pending}
	}
	if ns.Name != "" {
		return Name{Label: "netns " + ns.Name}
	}
	return Name{Label: "netns " + strconv.FormatUint(ns.Inode, 10)}
}

// podOf is the uid of the Kubernetes pod the first of pids that is in a
// pod's cgroup belongs to, as collectors.UnitAndContainer reads it from a
// cgroup path (/kubepods/besteffort/pod<uid>/<container>, or the systemd
// driver's kubepods-besteffort-pod<uid>.slice), and that path; "" for none.
func podOf(procRoot string, pids []int) (uid, cgroup string) {
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "cgroup"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			// "0::/kubepods/...", or a v1 hierarchy's "4:memory:/kubepods/..."
			_, path, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if _, path, ok = strings.Cut(path, ":"); !ok {
				continue
			}
			if strings.HasPrefix(line, "0::") {
				path = cgroupid.HostPath(path)
			}
			_, container := collectors.UnitAndContainer(path)
			if pod, ok := strings.CutPrefix(container, "pod "); ok {
				uid, _, _ := strings.Cut(pod, "/")
				return uid, path
			}
		}
	}
	return "", ""
}
