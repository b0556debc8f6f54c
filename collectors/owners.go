package collectors

// Owner is a process holding a program or map, directly or through a
// link, with where it runs: its cgroup, the systemd unit and the container
// the cgroup path names (empty where it names none).
type Owner struct {
	PID       int    `json:"pid"`
	Comm      string `json:"comm"`
	Cgroup    string `json:"cgroup,omitempty"`
	Unit      string `json:"unit,omitempty"`
	Container string `json:"container,omitempty"`
	// Pod is the container's pod by name, where the CRI socket lists it.
	Pod *Pod `json:"k8s,omitempty"`
	// Pin is the bpffs path of an object no process holds (PID 0).
	Pin string `json:"pin,omitempty"`
}

// PinOnly is the bpffs path when no process holds the object and only
// its pin keeps it (a loader that pinned it and exited), else "". Views
// name such an owner "pin:PATH", not by its empty comm and pid 0.
func (o Owner) PinOnly() string {
	if o.PID == 0 {
		return o.Pin
	}
	return ""
}

// Owners scans <procRoot>/*/fd for fds whose link target is
// anon_inode:bpf-prog or anon_inode:bpf_link, reads the program id from the
// "prog_id:" line of <procRoot>/<pid>/fdinfo/<fd>, and returns owner
// processes by program id, each pid once, sorted by pid. Processes and fds
// that cannot be read are skipped: they come and go.
func Owners(procRoot string) (map[uint32][]Owner, error) {
	h, err := ScanHolders(procRoot)
	return h.Progs, err
}
