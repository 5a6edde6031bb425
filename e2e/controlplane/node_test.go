package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/apis/core"
	corev1conv "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
)

// statusUpdateErrors is what the API server's own validation says of the
// status update from old to updated (the rules a kubelet's writes meet).
func statusUpdateErrors(t *testing.T, old, updated *corev1.Pod) []string {
	t.Helper()
	var o, n core.Pod
	if err := corev1conv.Convert_v1_Pod_To_core_Pod(old, &o, nil); err != nil {
		t.Fatal(err)
	}
	if err := corev1conv.Convert_v1_Pod_To_core_Pod(updated, &n, nil); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range validation.ValidatePodStatusUpdate(&n, &o, validation.PodValidationOptions{}) {
		out = append(out, e.Error())
	}
	return out
}

func ephemeral(name string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: "debug", Stdin: true, TTY: true}}
}

// The second day of the demo: a node started again on the data of an earlier
// start finds the statuses that start wrote. What ran then is gone (an
// ephemeral container that ran or ended is terminated for good, a regular one
// restarted once), what is added now runs, and every status it writes is one
// the API server accepts; written again, it is the same.
func TestARestartedNodeAdoptsTheContainersOfBeforeAndStartsNewOnes(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "checkout", Namespace: "shop", UID: "uid-1", ResourceVersion: "7"},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "app"}},
			EphemeralContainers: []corev1.EphemeralContainer{
				ephemeral("debug-ended"), ephemeral("debug-running"),
			},
		},
	}

	// The first start: one debug container ended, one still runs.
	first := newNodeSim(nil, 0)
	first.exited[uidContainer{pod.UID, "debug-ended"}] = 0
	pod.Status = *first.desiredStatus(pod)

	// The second start, on the same data, and a new debug container.
	second := newNodeSim(nil, 0)
	if first.bootID == second.bootID {
		t.Fatal("two starts share a boot id")
	}
	before := pod.DeepCopy()
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ephemeral("debug-new"))
	after := pod.DeepCopy()
	after.Status = *second.desiredStatus(pod)
	if errs := statusUpdateErrors(t, pod, after); len(errs) > 0 {
		t.Fatalf("the API server refuses the restarted node's status: %v", errs)
	}

	state := func(p *corev1.Pod, name string) corev1.ContainerStatus {
		for _, list := range [][]corev1.ContainerStatus{p.Status.EphemeralContainerStatuses, p.Status.ContainerStatuses} {
			if cs := findStatus(list, name); cs != nil {
				return *cs
			}
		}
		t.Fatalf("no status for %s in %+v", name, p.Status)
		return corev1.ContainerStatus{}
	}
	ended := state(after, "debug-ended")
	if ended.State.Terminated == nil || ended.State.Terminated.ExitCode != 0 || ended.State.Terminated.Reason != "Completed" ||
		ended.ContainerID != state(before, "debug-ended").ContainerID {
		t.Errorf("an ended debug container stays as it ended: %+v", ended)
	}
	lost := state(after, "debug-running")
	if lost.State.Terminated == nil || lost.State.Terminated.ExitCode != lostExitCode ||
		lost.State.Terminated.Reason != "ContainerStatusUnknown" {
		t.Errorf("a debug container that ran before the restart is reported lost: %+v", lost)
	}
	if fresh := state(after, "debug-new"); fresh.State.Running == nil {
		t.Errorf("the debug container added after the restart runs: %+v", fresh)
	}
	app := state(after, "app")
	if app.State.Running == nil || app.RestartCount != 1 || app.ContainerID == state(before, "app").ContainerID {
		t.Errorf("a regular container restarts once with the node: %+v", app)
	}

	// Settled: the next look writes nothing new, and nothing changes back.
	again := after.DeepCopy()
	again.Status = *second.desiredStatus(after)
	for _, name := range []string{"debug-ended", "debug-running", "debug-new", "app"} {
		a, b := state(after, name), state(again, name)
		if a.ContainerID != b.ContainerID || (a.State.Terminated == nil) != (b.State.Terminated == nil) || a.RestartCount != b.RestartCount {
			t.Errorf("%s changed on a second look: %+v then %+v", name, a, b)
		}
	}
	if errs := statusUpdateErrors(t, after, again); len(errs) > 0 {
		t.Fatalf("the second look's status is refused: %v", errs)
	}

	// The rule the node keeps is the API server's: a terminated ephemeral
	// container reported running again is refused (what the node did before).
	revived := after.DeepCopy()
	for i := range revived.Status.EphemeralContainerStatuses {
		cs := &revived.Status.EphemeralContainerStatuses[i]
		if cs.Name == "debug-ended" {
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
		}
	}
	if errs := statusUpdateErrors(t, after, revived); len(errs) == 0 {
		t.Error("the validation lets an ended ephemeral container run again; this test proves nothing")
	}
}

// An ended ephemeral container has nothing to attach to.
func TestAnEndedEphemeralContainerIsNotAttachable(t *testing.T) {
	pod := &corev1.Pod{Status: corev1.PodStatus{EphemeralContainerStatuses: []corev1.ContainerStatus{
		{Name: "debug-a", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		{Name: "debug-b", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}}}
	if !endedForGood(pod, "debug-a") || endedForGood(pod, "debug-b") || endedForGood(pod, "debug-c") {
		t.Error("only debug-a ended")
	}
}

// A regular container whose main process exited restarts as its pod's
// restartPolicy says (Always when unset, OnFailure when it failed); one that
// does not is terminated for good and cannot be attached to, as a copy pod's
// debug container (restartPolicy Never) is on a real node.
func TestARegularContainerRestartsOnlyAsItsPodsPolicySays(t *testing.T) {
	for _, c := range []struct {
		policy corev1.RestartPolicy
		code   int
		want   bool
	}{
		{"", 0, true}, {corev1.RestartPolicyAlways, 1, true},
		{corev1.RestartPolicyOnFailure, 1, true}, {corev1.RestartPolicyOnFailure, 0, false},
		{corev1.RestartPolicyNever, 1, false}, {corev1.RestartPolicyNever, 0, false},
	} {
		if got := restarts(c.policy, c.code); got != c.want {
			t.Errorf("restartPolicy %q, exit %d: restarts %v, want %v", c.policy, c.code, got, c.want)
		}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-bg-1", Namespace: "shop", UID: "uid-2", ResourceVersion: "3"},
		Spec: corev1.PodSpec{
			NodeName: nodeName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "app", Image: "app"}, {Name: "debug-1", Image: "debug"}},
		},
	}
	node := newNodeSim(nil, 0)
	pod.Status = *node.desiredStatus(pod)
	// What containerExited records for it under Never.
	node.exited[uidContainer{pod.UID, "debug-1"}] = 143
	after := pod.DeepCopy()
	after.Status = *node.desiredStatus(pod)
	if errs := statusUpdateErrors(t, pod, after); len(errs) > 0 {
		t.Fatalf("the API server refuses the status: %v", errs)
	}
	debug := findStatus(after.Status.ContainerStatuses, "debug-1")
	if debug.State.Terminated == nil || debug.State.Terminated.ExitCode != 143 || debug.Ready || debug.RestartCount != 0 {
		t.Fatalf("the ended container is terminated for good: %+v", debug)
	}
	if app := findStatus(after.Status.ContainerStatuses, "app"); app.State.Running == nil {
		t.Fatalf("the other container runs on: %+v", app)
	}
	if !endedForGood(after, "debug-1") || endedForGood(after, "app") {
		t.Fatal("only the ended container refuses an attach")
	}
}
