package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bpfperf/bpfperf/internal/node"
)

// Pod turns the DaemonSet's pod template into the test node's pod spec,
// as a kubelet would hand it to the runtime: hostPID and hostNetwork; for
// each container its image, command, args ($(VAR) expanded from its env,
// as a kubelet does; fieldRef values from fields, "status.podIP" say),
// env, capabilities, read-only root, user, no-new-privileges and seccomp;
// and each volume mount of a hostPath volume at the volume's host path.
// hostPath directories of type DirectoryOrCreate are made (0755, as a
// kubelet makes them). A secret volume is written as a kubelet writes it,
// from env's secrets (there is no API server to read them from): each key
// a file under env.VolumeDir, with the volume's mode, mounted read-only.
//
// What the node cannot run as the chart says is an error (a privileged
// container, a volume other than hostPath or secret), except one thing, returned
// in notes: a HostToContainer mount whose host mount is private (a host
// without systemd), which the runtime would refuse, runs as a private
// bind mount; it shows what is mounted now, not what is mounted later.
func Pod(ds *appsv1.DaemonSet, namespace, name string, env Env) (spec node.PodSpec, notes []string, err error) {
	ps := ds.Spec.Template.Spec
	spec = node.PodSpec{Namespace: namespace, Name: name, Labels: ds.Spec.Template.Labels, HostPID: ps.HostPID, HostNetwork: ps.HostNetwork}
	if len(ps.InitContainers) > 0 {
		return spec, nil, fmt.Errorf("init containers: the node runs none")
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range ps.Containers {
		cs, cnotes, err := container(c, ps.SecurityContext, volumes, env)
		if err != nil {
			return spec, nil, fmt.Errorf("container %s: %w", c.Name, err)
		}
		spec.Containers = append(spec.Containers, cs)
		notes = append(notes, cnotes...)
	}
	return spec, notes, nil
}

// Env is what a kubelet would take from the node and the API server for
// a pod: the spec only names it.
type Env struct {
	// Fields are the values of fieldRef env vars ("status.podIP").
	Fields map[string]string
	// Secrets are the Secrets secret volumes name: name, key, value.
	Secrets map[string]map[string][]byte
	// VolumeDir is where secret volumes are written (a kubelet's
	// pods/UID/volumes): one directory per volume, made here.
	VolumeDir string
}

func container(c corev1.Container, pod *corev1.PodSecurityContext, volumes map[string]corev1.Volume, env Env) (node.ContainerSpec, []string, error) {
	fields := env.Fields
	cs := node.ContainerSpec{Name: c.Name, Image: c.Image}
	vars := map[string]string{}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return cs, nil, fmt.Errorf("env %s: only fieldRef values are known here", e.Name)
			}
			var ok bool
			if v, ok = fields[e.ValueFrom.FieldRef.FieldPath]; !ok {
				return cs, nil, fmt.Errorf("env %s: no value given for field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		vars[e.Name] = v
		cs.Env = append(cs.Env, e.Name+"="+v)
	}
	cs.Command, cs.Args = expand(c.Command, vars), expand(c.Args, vars)

	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if sc.Privileged != nil && *sc.Privileged {
		return cs, nil, fmt.Errorf("privileged: the node runs no privileged container")
	}
	if sc.Capabilities != nil {
		for _, a := range sc.Capabilities.Add {
			cs.Caps = append(cs.Caps, string(a))
		}
		for _, d := range sc.Capabilities.Drop {
			cs.DropCaps = append(cs.DropCaps, string(d))
		}
	}
	cs.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	cs.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	cs.RunAsUser = sc.RunAsUser
	if cs.RunAsUser == nil && pod != nil {
		cs.RunAsUser = pod.RunAsUser
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && pod != nil {
		seccomp = pod.SeccompProfile
	}
	if seccomp != nil {
		switch seccomp.Type {
		case corev1.SeccompProfileTypeRuntimeDefault:
			cs.Seccomp = "RuntimeDefault"
		case corev1.SeccompProfileTypeUnconfined:
		default:
			return cs, nil, fmt.Errorf("seccomp profile %s: the node knows RuntimeDefault and Unconfined", seccomp.Type)
		}
	}

	var notes []string
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return cs, nil, fmt.Errorf("volume mount %s: no such volume", m.Name)
		}
		if m.SubPath != "" || m.SubPathExpr != "" {
			return cs, nil, fmt.Errorf("volume mount %s: subPath is not done here", m.Name)
		}
		if v.Secret != nil {
			dir, err := secretVolume(v, env)
			if err != nil {
				return cs, nil, fmt.Errorf("volume %s: %w", m.Name, err)
			}
			// Read-only whatever the mount says, as a kubelet mounts
			// secrets.
			cs.Mounts = append(cs.Mounts, node.Mount{Host: dir, Container: m.MountPath})
			continue
		}
		if v.HostPath == nil {
			return cs, nil, fmt.Errorf("volume %s: the node mounts hostPath and secret volumes only", m.Name)
		}
		if v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectoryOrCreate {
			if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
				return cs, nil, fmt.Errorf("volume %s: %w", m.Name, err)
			}
		}
		if fi, err := os.Stat(v.HostPath.Path); err != nil || !fi.IsDir() {
			return cs, nil, fmt.Errorf("volume %s: host path %s is not a directory (%v)", m.Name, v.HostPath.Path, err)
		}
		mount := node.Mount{Host: v.HostPath.Path, Container: m.MountPath, Writable: !m.ReadOnly}
		if m.MountPropagation != nil {
			switch *m.MountPropagation {
			case corev1.MountPropagationHostToContainer:
				shared, err := node.Propagates(v.HostPath.Path)
				if err != nil {
					return cs, nil, err
				}
				if shared {
					mount.HostToContainer = true
				} else {
					notes = append(notes, fmt.Sprintf("volume %s: HostToContainer runs as a private mount: the host's mount of %s is private here", m.Name, v.HostPath.Path))
				}
			case corev1.MountPropagationNone:
			default:
				return cs, nil, fmt.Errorf("volume mount %s: propagation %s is not done here", m.Name, *m.MountPropagation)
			}
		}
		cs.Mounts = append(cs.Mounts, mount)
	}
	return cs, notes, nil
}

// secretVolume writes secret volume v's files, from env's secrets, into a
// directory of its own under env.VolumeDir and returns it: every key of
// the Secret (or the items listed, at their paths), mode defaultMode
// (0644 when unset) or the item's.
func secretVolume(v corev1.Volume, env Env) (string, error) {
	src := v.Secret
	data, ok := env.Secrets[src.SecretName]
	if !ok {
		// A kubelet leaves such a pod waiting for the Secret.
		return "", fmt.Errorf("secret %s: not given to the node", src.SecretName)
	}
	if env.VolumeDir == "" {
		return "", fmt.Errorf("secret %s: no directory to write it in", src.SecretName)
	}
	mode := os.FileMode(corev1.SecretVolumeSourceDefaultMode)
	if src.DefaultMode != nil {
		mode = os.FileMode(*src.DefaultMode)
	}
	type file struct {
		path string
		mode os.FileMode
		data []byte
	}
	var files []file
	if len(src.Items) == 0 {
		for k, d := range data {
			files = append(files, file{k, mode, d})
		}
	}
	for _, it := range src.Items {
		d, ok := data[it.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", src.SecretName, it.Key)
		}
		f := file{it.Path, mode, d}
		if it.Mode != nil {
			f.mode = os.FileMode(*it.Mode)
		}
		files = append(files, f)
	}
	dir := filepath.Join(env.VolumeDir, v.Name)
	for _, f := range files {
		if !filepath.IsLocal(f.path) {
			return "", fmt.Errorf("secret %s: path %q leaves the volume", src.SecretName, f.path)
		}
		p := filepath.Join(dir, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return "", err
		}
		if err := os.Chmod(p, f.mode); err != nil { // past the umask
			return "", err
		}
	}
	return dir, os.MkdirAll(dir, 0o755)
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand replaces $(VAR) with VAR's value where the container defines it,
// as a kubelet expands command and args; others stay as written.
func expand(args []string, vars map[string]string) []string {
	var out []string
	for _, a := range args {
		out = append(out, varRef.ReplaceAllStringFunc(a, func(ref string) string {
			if v, ok := vars[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref
		}))
	}
	return out
}

// Probe is the exec command of a probe, or nil when it execs nothing.
func Probe(p *corev1.Probe) []string {
	if p == nil || p.Exec == nil {
		return nil
	}
	return p.Exec.Command
}
