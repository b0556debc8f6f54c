// Package podman names Podman's containers where no Kubernetes runs: a
// process in one has a cgroup libpod-<id> (cgroupfs: /libpod_parent/
// libpod-<id>; systemd: machine.slice/libpod-<id>.scope), and the name a
// user gave it (podman run --name web) is in containers/storage's record
// of containers, <root>/<driver>-containers/containers.json, which podman,
// buildah and CRI-O share. Reading that file asks no daemon (rootful
// podman has none) and nothing of the user.
package podman

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// DefaultRoot is rootful podman's storage (containers-storage.conf's
// graphroot).
const DefaultRoot = "/var/lib/containers/storage"

// Names maps podman containers' cgroups to their names. Safe for
// concurrent use; a nil *Names names nothing.
type Names struct {
	root string

	mu    sync.Mutex
	files map[string]stamp // containers.json path → what was read of it
	names map[string]string
}

// stamp tells a containers.json that changed since it was read.
type stamp struct {
	mod  time.Time
	size int64
}

// New names the containers recorded under root (DefaultRoot when "").
func New(root string) *Names {
	if root == "" {
		root = DefaultRoot
	}
	return &Names{root: root, files: map[string]stamp{}, names: map[string]string{}}
}

// Name is the name of the podman container whose cgroup this is, "" for
// another cgroup or a container not recorded (yet). The records are read
// again when one of them changed: a container made since is named at its
// first lookup.
func (n *Names) Name(cgroup string) string {
	if n == nil {
		return ""
	}
	id, ok := ContainerID(cgroup)
	if !ok {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.names[id]; ok {
		return name
	}
	n.reload()
	return n.names[id]
}

// reload reads every containers.json that changed since it was last read.
// Called with n.mu held.
func (n *Names) reload() {
	paths, _ := filepath.Glob(filepath.Join(n.root, "*-containers", "containers.json"))
	changed := len(paths) != len(n.files)
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		if st := (stamp{fi.ModTime(), fi.Size()}); n.files[p] != st {
			changed = true
		}
	}
	if !changed {
		return
	}
	names := map[string]string{}
	files := map[string]stamp{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var recs []struct {
			ID    string   `json:"id"`
			Names []string `json:"names"`
		}
		if json.Unmarshal(b, &recs) != nil {
			continue
		}
		files[p] = stamp{fi.ModTime(), fi.Size()}
		for _, r := range recs {
			if len(r.Names) > 0 {
				names[r.ID] = r.Names[0]
			}
		}
	}
	n.files, n.names = files, names
}

// ContainerID reads a podman container's id from its cgroup path: the
// element libpod-<id> or libpod-<id>.scope (podman may nest a "container"
// cgroup in it); ok is false for any other cgroup.
func ContainerID(cgroup string) (string, bool) {
	for _, el := range strings.Split(cgroup, "/") {
		id, ok := strings.CutPrefix(strings.TrimSuffix(el, ".scope"), "libpod-")
		if ok && len(id) == 64 && strings.Trim(id, "0123456789abcdef") == "" {
			return id, true
		}
	}
	return "", false
}
