package pods

import (
	"strings"
	"testing"
)

func TestWorkloadOf(t *testing.T) {
	long := strings.Repeat("a", 50) + "-dep" // 54: "<long>-<hash>-" is cut at 58
	cases := []struct {
		name   string
		labels map[string]string
		want   Workload
	}{
		{"loader-7d9f8b6c5-x2k4p", map[string]string{"app": "loader", "pod-template-hash": "7d9f8b6c5"}, Workload{"Deployment", "loader"}},
		{"coredns-5d78c9869d-8qnpv", map[string]string{"k8s-app": "kube-dns", "pod-template-hash": "5d78c9869d"}, Workload{"Deployment", "coredns"}},
		// A ReplicaSet made without a Deployment: its pods carry no hash.
		{"frontend-b2zdv", map[string]string{"tier": "frontend"}, Workload{"Pod", "frontend-b2zdv"}},
		// pod-template-hash but the name holds no hash: a ReplicaSet.
		{"rs-b2zdv", map[string]string{"pod-template-hash": "7d9f8b6c5"}, Workload{"ReplicaSet", "rs"}},
		{(long + "-7d9f8b6c5-")[:58] + "x2k4p", map[string]string{"pod-template-hash": "7d9f8b6c5"}, Workload{"Deployment", long}},
		{"cilium-4xq9z", map[string]string{"k8s-app": "cilium", "controller-revision-hash": "6b8f7d4c9", "pod-template-generation": "1"}, Workload{"DaemonSet", "cilium"}},
		{"web-0", map[string]string{"controller-revision-hash": "web-6d4b5c5f9c", "statefulset.kubernetes.io/pod-name": "web-0"}, Workload{"StatefulSet", "web"}},
		{"db-12", map[string]string{"controller-revision-hash": "db-7f9c8d6b5"}, Workload{"StatefulSet", "db"}},
		{"pi-28391045-mn6xk", map[string]string{"batch.kubernetes.io/job-name": "pi-28391045", "job-name": "pi-28391045"}, Workload{"Job", "pi-28391045"}},
		{"pi-kqz7m", map[string]string{"job-name": "pi"}, Workload{"Job", "pi"}},
		{"kube-apiserver-node1", map[string]string{"component": "kube-apiserver", "tier": "control-plane"}, Workload{"Pod", "kube-apiserver-node1"}},
		{"loader", nil, Workload{"Pod", "loader"}},
		// A random part with a vowel is not the API server's.
		{"loader-7d9f8b6c5-abcde", map[string]string{"pod-template-hash": "7d9f8b6c5"}, Workload{"Pod", "loader-7d9f8b6c5-abcde"}},
	}
	for _, c := range cases {
		if got := WorkloadOf(c.name, c.labels); got != c.want {
			t.Errorf("WorkloadOf(%q, %v) = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

func TestContainerID(t *testing.T) {
	id := strings.Repeat("0a", 32)
	cases := []struct {
		cgroup string
		want   string
	}{
		{"/kubepods/besteffort/pod0f1e2d3c-0000-1111-2222-333344445555/" + id, id},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f1e2d3c_0000.slice/cri-containerd-" + id + ".scope", id},
		{"/kubepods.slice/kubepods-pod1.slice/crio-" + id + ".scope", id},
		{"/system.slice/docker-" + id + ".scope", id},
		{"/machine.slice/libpod-" + id + ".scope/container", id},
		{"/system.slice/containerd.service", ""},
		{"/kubepods/besteffort/pod0f1e2d3c", ""},
		{"/user.slice/" + id[:63], ""},
	}
	for _, c := range cases {
		got, ok := ContainerID(c.cgroup)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ContainerID(%q) = %q, %v; want %q", c.cgroup, got, ok, c.want)
		}
	}
}
