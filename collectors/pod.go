package collectors

// Pod names the Kubernetes container a cgroup belongs to, as the node's
// container runtime lists it on its CRI socket (daemon/podnames fills it):
// what users call a pod, where the cgroup path alone gives only the pod's
// uid and a container id. JSON names follow the labels Prometheus and
// OpenTelemetry users know (namespace, pod, container).
type Pod struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	UID         string `json:"pod_uid"`
	Container   string `json:"container"`
	ContainerID string `json:"container_id"`
	// Workload is what owns the pod, "KIND/NAME" ("Deployment/loader"),
	// as the pod's name and labels tell (internal/pods.WorkloadOf); "Pod/NAME"
	// for a pod nothing owns that we can tell.
	Workload string `json:"workload"`
}

// String is how views name it: "NAMESPACE/POD (container NAME)".
func (p *Pod) String() string {
	return p.Namespace + "/" + p.Pod + " (container " + p.Container + ")"
}

// RunPod is the pod that runs the program, as its identity's runner takes
// it: its loader's, else its first holder's in a pod; nil for none.
func (m *Meta) RunPod() *Pod {
	if lo := m.Loader; lo != nil && lo.Pod != nil {
		return lo.Pod
	}
	for _, o := range m.Owners {
		if o.Pod != nil {
			return o.Pod
		}
	}
	return nil
}
