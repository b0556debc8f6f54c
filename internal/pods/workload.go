package pods

import (
	"regexp"
	"strings"
)

// Workload is what owns a pod, as a user names it: a Deployment, not its
// ReplicaSet of the moment; kind "Pod" for a pod nothing owns that we can
// tell.
type Workload struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

func (w Workload) String() string { return w.Kind + "/" + w.Name }

// Labels the controllers put on their pods.
const (
	labelPodTemplateHash   = "pod-template-hash"
	labelRevisionHash      = "controller-revision-hash"
	labelStatefulSetPod    = "statefulset.kubernetes.io/pod-name"
	labelJobName           = "batch.kubernetes.io/job-name"
	labelJobNameLegacy     = "job-name"
	generatedSuffixLen     = 5
	maxGenerateNamePrefix  = 63 - generatedSuffixLen
	generatedSuffixPattern = `-[bcdfghjklmnpqrstvwxz2456789]{5}$`
)

var (
	// generatedSuffix is the random part the API server appends to a
	// generateName (k8s.io/apimachinery's rand alphabet: no vowels, no
	// 0, 1, 3).
	generatedSuffix = regexp.MustCompile(generatedSuffixPattern)
	ordinal         = regexp.MustCompile(`^(.+)-([0-9]+)$`)
)

// WorkloadOf derives a pod's workload from its name and labels, as the
// controllers make them, where no owner reference is at hand (the CRI has
// none):
//
//   - a Job's pods carry its name in a label;
//   - a Deployment's pods are named <deployment>-<pod-template-hash>-<5
//     random>, the hash also a label;
//   - a StatefulSet's are <statefulset>-<ordinal>, with a
//     controller-revision-hash of <statefulset>-<hash>;
//   - a DaemonSet's are <daemonset>-<5 random>, with a
//     controller-revision-hash too.
//
// A generateName longer than 58 characters is cut there before the random
// part: the Deployment's name is found before a cut hash, a DaemonSet's
// may come out short.
func WorkloadOf(name string, labels map[string]string) Workload {
	if j := labels[labelJobName]; j != "" {
		return Workload{"Job", j}
	}
	if j := labels[labelJobNameLegacy]; j != "" {
		return Workload{"Job", j}
	}
	base, generated := generatedBase(name) // "<rs>-", maybe cut
	if h := labels[labelPodTemplateHash]; h != "" && generated {
		if d := beforeCut(base, "-"+h+"-"); d != "" {
			return Workload{"Deployment", d}
		}
		return Workload{"ReplicaSet", strings.TrimSuffix(base, "-")}
	}
	if r := labels[labelRevisionHash]; r != "" {
		if m := ordinal.FindStringSubmatch(name); m != nil && (labels[labelStatefulSetPod] == name || strings.HasPrefix(r, m[1]+"-")) {
			return Workload{"StatefulSet", m[1]}
		}
		if generated {
			return Workload{"DaemonSet", strings.TrimSuffix(base, "-")}
		}
	}
	return Workload{"Pod", name}
}

// generatedBase returns the generateName a pod's name was made from: the
// name less its random part, which follows a "-" unless the generateName
// was cut.
func generatedBase(name string) (string, bool) {
	if generatedSuffix.MatchString(name) {
		return name[:len(name)-generatedSuffixLen], true
	}
	if len(name) == maxGenerateNamePrefix+generatedSuffixLen && generatedSuffix.MatchString("-"+name[maxGenerateNamePrefix:]) {
		return name[:maxGenerateNamePrefix], true
	}
	return "", false
}

// beforeCut returns what comes before sep in base, where base ends in sep
// or, when the API server cut base at maxGenerateNamePrefix, in the part
// of sep it kept; "" when it ends in no part of sep.
func beforeCut(base, sep string) string {
	if strings.HasSuffix(base, sep) {
		return strings.TrimSuffix(base, sep)
	}
	if len(base) < maxGenerateNamePrefix {
		return ""
	}
	// Cut: base ends in a prefix of sep of at least "-" and one hash
	// character, so that a dash in the name alone does not count.
	for k := len(sep) - 1; k >= 2; k-- {
		if strings.HasSuffix(base, sep[:k]) {
			return strings.TrimSuffix(base, sep[:k])
		}
	}
	return ""
}
