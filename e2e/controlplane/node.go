package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// nodeName is the one simulated node every pod lands on.
const nodeName = "node-1"

// NeverStartEphemeralAnnotation set to "true" on a pod makes the node never
// start its ephemeral containers (reported waiting in ImagePullBackOff), so
// tests can walk an activation whose debug container never runs.
const NeverStartEphemeralAnnotation = "e2e.breakglass.test/ephemeral-never-starts"

// nodeSim plays scheduler and kubelet for one node: it binds unscheduled
// pods to the node, reports them and their containers (ephemeral ones too)
// running, and completes deletions.
type nodeSim struct {
	client      kubernetes.Interface
	kubeletPort int
	shells      *shellManager
	// bootID is new at every start of this process, as a real node's is at
	// every boot: the containers it runs carry it in their ids, so a status
	// written by an earlier start is told apart from this start's own.
	bootID string

	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	queue     workqueue.TypedRateLimitingInterface[string]

	mu       sync.Mutex
	ips      map[types.UID]string
	nextIP   int
	exited   map[uidContainer]int32 // ephemeral containers whose shell ended: exit code
	restarts map[uidContainer]int32 // regular containers whose shell ended and restarts
	// adopted: containers found in a status written before this start, whose
	// processes did not survive it (ephemeral ones are then terminated for
	// good, regular ones restarted once).
	adopted map[uidContainer]bool
}

type uidContainer struct {
	UID       types.UID
	Container string
}

func newNodeSim(client kubernetes.Interface, kubeletPort int) *nodeSim {
	s := &nodeSim{
		client:      client,
		kubeletPort: kubeletPort,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](20*time.Millisecond, 2*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node-sim"}),
		ips:      map[types.UID]string{},
		nextIP:   2,
		exited:   map[uidContainer]int32{},
		restarts: map[uidContainer]int32{},
		adopted:  map[uidContainer]bool{},
		bootID:   newBootID(),
	}
	s.factory = informers.NewSharedInformerFactory(client, 0)
	podInformer := s.factory.Core().V1().Pods()
	s.podLister = podInformer.Lister()
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    s.enqueue,
		UpdateFunc: func(_, obj interface{}) { s.enqueue(obj) },
		DeleteFunc: func(obj interface{}) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				s.forget(pod)
			}
		},
	})
	return s
}

// newBootID is a random id for this start of the node.
func newBootID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *nodeSim) enqueue(obj interface{}) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err == nil {
		s.queue.Add(key)
	}
}

// registerNode creates the Node object and reports it Ready.
func (s *nodeSim) registerNode(ctx context.Context) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName,
			Labels: map[string]string{
				"kubernetes.io/hostname": nodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
	}
	if _, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create node: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := s.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		now := metav1.Now()
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("8"),
			corev1.ResourceMemory:           resource.MustParse("16Gi"),
			corev1.ResourcePods:             resource.MustParse("250"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		}
		n.Status = corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "simulated kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.0.1"},
				{Type: corev1.NodeHostName, Address: nodeName},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(s.kubeletPort)}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID:               "breakglass-sim",
				SystemUUID:              "breakglass-sim",
				BootID:                  s.bootID,
				KernelVersion:           "simulated",
				OSImage:                 "simulated node",
				ContainerRuntimeVersion: "sim://1.0.0",
				KubeletVersion:          kubeVersion,
				OperatingSystem:         "linux",
				Architecture:            "amd64",
			},
		}
		if _, err := s.client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
			klog.V(2).InfoS("node status update failed, retrying", "err", err)
			return false, nil
		}
		// TaintNodesByCondition put a not-ready taint on the new node; the
		// node lifecycle controller would lift it, we do it ourselves.
		n, err = s.client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if len(n.Spec.Taints) > 0 {
			n.Spec.Taints = nil
			if _, err := s.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

// run starts the pod informer and workers; returns once the cache synced.
func (s *nodeSim) run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache for %v did not sync", typ)
		}
	}
	for i := 0; i < 4; i++ {
		go wait.UntilWithContext(ctx, s.worker, time.Second)
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
	}()
	return nil
}

func (s *nodeSim) worker(ctx context.Context) {
	for {
		key, quit := s.queue.Get()
		if quit {
			return
		}
		err := s.sync(ctx, key)
		if err != nil && ctx.Err() == nil {
			if !apierrors.IsConflict(err) {
				klog.V(2).InfoS("pod sync failed, retrying", "pod", key, "err", err)
			}
			s.queue.AddRateLimited(key)
		} else {
			s.queue.Forget(key)
		}
		s.queue.Done(key)
	}
}

// pod returns a pod bound to this node, from the cache or, when fresh is
// set, from the API server.
func (s *nodeSim) pod(ctx context.Context, namespace, name string, fresh bool) (*corev1.Pod, bool) {
	var pod *corev1.Pod
	var err error
	if fresh {
		pod, err = s.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	} else {
		pod, err = s.podLister.Pods(namespace).Get(name)
	}
	if err != nil || pod.Spec.NodeName != nodeName {
		return nil, false
	}
	return pod, true
}

func (s *nodeSim) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := s.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}

	if pod.Spec.NodeName == "" {
		if pod.DeletionTimestamp != nil || len(pod.Spec.SchedulingGates) > 0 {
			return nil
		}
		binding := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
		}
		err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if pod.Spec.NodeName != nodeName {
		return nil
	}

	if pod.DeletionTimestamp != nil {
		// The kubelet's part of a graceful deletion: stop the containers,
		// then remove the object for good. Finalizers, if any, hold it
		// until their owners remove them.
		s.shells.killPod(pod.Namespace, pod.Name)
		zero := int64(0)
		err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: &zero,
			Preconditions:      &metav1.Preconditions{UID: &pod.UID},
		})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}

	status := s.desiredStatus(pod)
	if equality.Semantic.DeepEqual(status, &pod.Status) {
		return nil
	}
	updated := pod.DeepCopy()
	updated.Status = *status
	_, err = s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (s *nodeSim) forget(pod *corev1.Pod) {
	s.shells.killPod(pod.Namespace, pod.Name)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.ips, pod.UID)
	for k := range s.exited {
		if k.UID == pod.UID {
			delete(s.exited, k)
		}
	}
	for k := range s.restarts {
		if k.UID == pod.UID {
			delete(s.restarts, k)
		}
	}
	for k := range s.adopted {
		if k.UID == pod.UID {
			delete(s.adopted, k)
		}
	}
}

// containerSpec says how the node runs a container. A debug container (an
// ephemeral container, or a copy pod's debug-* container) runs its own
// command with the plain values of its environment and the debug image's
// files, in its target's PID namespace if it names one; other containers run
// an interactive /bin/sh whatever their image, as before. Every container of
// a pod with shareProcessNamespace is in the pod's PID namespace.
func (s *nodeSim) containerSpec(key containerKey) containerRun {
	pod, err := s.podLister.Pods(key.Namespace).Get(key.Pod)
	if err != nil {
		return containerRun{}
	}
	share := pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace
	own := func(command, args []string, env []corev1.EnvVar) containerRun {
		var vars []string
		for _, e := range env {
			if e.ValueFrom == nil {
				vars = append(vars, e.Name+"="+e.Value)
			}
		}
		return containerRun{
			argv: append(append([]string{}, command...), args...), env: vars,
			sharePod: share, image: true,
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == key.Container {
			run := own(c.Command, c.Args, c.Env)
			run.target = c.TargetContainerName
			return run
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == key.Container && strings.HasPrefix(c.Name, "debug-") {
			return own(c.Command, c.Args, c.Env)
		}
	}
	return containerRun{sharePod: share}
}

// containerExited is called by the shell manager when a container's shell
// ends: an ephemeral container is then reported terminated, a regular one
// restarted (its next attach starts a new shell).
func (s *nodeSim) containerExited(key containerKey, code int) {
	pod, err := s.podLister.Pods(key.Namespace).Get(key.Pod)
	if err != nil || pod.DeletionTimestamp != nil {
		return
	}
	ephemeral := false
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == key.Container {
			ephemeral = true
		}
	}
	s.mu.Lock()
	uc := uidContainer{pod.UID, key.Container}
	if ephemeral || !restarts(pod.Spec.RestartPolicy, code) {
		s.exited[uc] = int32(code)
	} else {
		s.restarts[uc]++
	}
	s.mu.Unlock()
	s.queue.Add(key.Namespace + "/" + key.Pod)
}

// restarts reports whether a regular container that exited with code is
// started again under the pod's restart policy (Always when unset).
func restarts(policy corev1.RestartPolicy, code int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	default:
		return true
	}
}

func (s *nodeSim) podIP(uid types.UID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ip, ok := s.ips[uid]; ok {
		return ip
	}
	n := s.nextIP
	s.nextIP++
	ip := fmt.Sprintf("10.244.%d.%d", (n/250)%250, n%250+1)
	s.ips[uid] = ip
	return ip
}

// containerID names one run of a container: on this start of the node
// (bootID), of pod uid, after restarts restarts.
func (s *nodeSim) containerID(uid types.UID, name string, restarts int32) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%s/%d", s.bootID, uid, name, restarts)))
	return "sim://" + hex.EncodeToString(sum[:])
}

// fromEarlierStart reports whether a container's previous status was written
// by an earlier start of this node (its id is not the one this start gives
// that run of the container).
func (s *nodeSim) fromEarlierStart(uid types.UID, prev *corev1.ContainerStatus) bool {
	return prev != nil && prev.ContainerID != "" && prev.ContainerID != s.containerID(uid, prev.Name, prev.RestartCount)
}

// adopt takes over, once, what an earlier start of the node left in a
// container's status, as a runtime does after a reboot: the processes are
// gone. An ephemeral container that ran or ended then is terminated now and
// for good (the API server refuses a terminated container that runs again,
// which left every later status of the pod unwritten); a regular container
// restarts (restartCount one more). Called with s.mu held.
func (s *nodeSim) adopt(uid types.UID, prev *corev1.ContainerStatus, ephemeral bool) {
	uc := uidContainer{uid, prev.Name}
	if s.adopted[uc] {
		return
	}
	if !s.fromEarlierStart(uid, prev) {
		return
	}
	s.adopted[uc] = true
	if ephemeral {
		if t := prev.State.Terminated; t != nil {
			s.exited[uc] = t.ExitCode
		} else {
			// What a kubelet reports for a container it lost: exit code 137.
			s.exited[uc] = lostExitCode
		}
		return
	}
	s.restarts[uc] = prev.RestartCount + 1
}

// lostExitCode is the exit code of a container whose processes did not
// survive a restart of the node.
const lostExitCode = 137

func imageID(image string) string {
	sum := sha256.Sum256([]byte(image))
	return image + "@sha256:" + hex.EncodeToString(sum[:])
}

// desiredStatus is the status a healthy kubelet would report for the pod.
// Existing entries keep their timestamps so that a settled pod compares
// equal and is not rewritten.
func (s *nodeSim) desiredStatus(pod *corev1.Pod) *corev1.PodStatus {
	st := pod.Status.DeepCopy()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	st.Phase = corev1.PodRunning
	st.ObservedGeneration = pod.Generation
	st.HostIP = "127.0.0.1"
	st.HostIPs = []corev1.HostIP{{IP: "127.0.0.1"}}
	ip := s.podIP(pod.UID)
	st.PodIP = ip
	st.PodIPs = []corev1.PodIP{{IP: ip}}
	if st.StartTime == nil {
		st.StartTime = &now
	}
	st.Reason, st.Message = "", ""

	s.mu.Lock()
	defer s.mu.Unlock()

	st.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		prev := findStatus(pod.Status.InitContainerStatuses, c.Name)
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image),
			ContainerID: s.containerID(pod.UID, c.Name, 0), Ready: true, Started: ptr(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
				ContainerID: s.containerID(pod.UID, c.Name, 0)}},
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			// A sidecar keeps running.
			cs.Started = ptr(true)
			cs.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}
		}
		keepTimes(prev, &cs)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}

	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		prev := findStatus(pod.Status.ContainerStatuses, c.Name)
		if prev != nil {
			s.adopt(pod.UID, prev, false)
		}
		restarts := s.restarts[uidContainer{pod.UID, c.Name}]
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image),
			ContainerID: s.containerID(pod.UID, c.Name, restarts), Ready: true, Started: ptr(true),
			RestartCount: restarts,
			State:        corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}
		if restarts > 0 {
			cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
				ContainerID: s.containerID(pod.UID, c.Name, restarts-1)}}
		}
		if code, ok := s.exited[uidContainer{pod.UID, c.Name}]; ok {
			// Ended for good (restartPolicy Never, or OnFailure and it succeeded).
			started := now
			if prev != nil && prev.State.Running != nil {
				started = prev.State.Running.StartedAt
			}
			reason := "Completed"
			if code != 0 {
				reason = "Error"
			}
			cs.Ready, cs.Started = false, ptr(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: now, ContainerID: cs.ContainerID}}
		}
		keepTimes(prev, &cs)
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}

	st.EphemeralContainerStatuses = nil
	stuck := pod.Annotations[NeverStartEphemeralAnnotation] == "true"
	for _, c := range pod.Spec.EphemeralContainers {
		prev := findStatus(pod.Status.EphemeralContainerStatuses, c.Name)
		if prev != nil && prev.State.Terminated != nil && !s.fromEarlierStart(pod.UID, prev) {
			// Ended on this start: it stays as it ended (a terminated
			// ephemeral container never runs again).
			s.exited[uidContainer{pod.UID, c.Name}] = prev.State.Terminated.ExitCode
		}
		if prev != nil {
			s.adopt(pod.UID, prev, true)
		}
		if _, lost := s.exited[uidContainer{pod.UID, c.Name}]; stuck && !lost {
			// What a real kubelet shows for an image it cannot pull: waiting, forever.
			st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image, Ready: false, Started: ptr(false),
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: "simulated: " + NeverStartEphemeralAnnotation}},
			})
			continue
		}
		id := s.containerID(pod.UID, c.Name, 0)
		if prev != nil && s.adopted[uidContainer{pod.UID, c.Name}] {
			// An earlier start's container keeps the id it had.
			id = prev.ContainerID
		}
		cs := corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image),
			ContainerID: id, Ready: false, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}
		if code, ok := s.exited[uidContainer{pod.UID, c.Name}]; ok {
			reason := "Completed"
			if code != 0 {
				reason = "Error"
			}
			message := ""
			if prev != nil && prev.State.Terminated != nil {
				reason, message = prev.State.Terminated.Reason, prev.State.Terminated.Message
			} else if s.adopted[uidContainer{pod.UID, c.Name}] {
				reason, message = "ContainerStatusUnknown", "The container could not be located when the node restarted"
			}
			started := now
			if prev != nil && prev.State.Running != nil {
				started = prev.State.Running.StartedAt
			} else if prev != nil && prev.State.Terminated != nil {
				started = prev.State.Terminated.StartedAt
			}
			cs.Started = ptr(false)
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: reason, Message: message, StartedAt: started, FinishedAt: now,
				ContainerID: cs.ContainerID}}
		}
		keepTimes(prev, &cs)
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, cs)
	}

	setCondition(st, corev1.PodScheduled, pod.Generation, now)
	setCondition(st, corev1.PodReadyToStartContainers, pod.Generation, now)
	setCondition(st, corev1.PodInitialized, pod.Generation, now)
	setCondition(st, corev1.ContainersReady, pod.Generation, now)
	setCondition(st, corev1.PodReady, pod.Generation, now)
	return st
}

func ptr[T any](v T) *T { return &v }

func findStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// keepTimes carries timestamps over from the previous status of the same
// container when its state kind did not change.
func keepTimes(prev *corev1.ContainerStatus, cs *corev1.ContainerStatus) {
	if prev == nil || prev.ContainerID != cs.ContainerID {
		return
	}
	switch {
	case cs.State.Running != nil && prev.State.Running != nil:
		cs.State.Running.StartedAt = prev.State.Running.StartedAt
	case cs.State.Terminated != nil && prev.State.Terminated != nil:
		cs.State.Terminated.StartedAt = prev.State.Terminated.StartedAt
		cs.State.Terminated.FinishedAt = prev.State.Terminated.FinishedAt
	}
	if cs.LastTerminationState.Terminated != nil && prev.LastTerminationState.Terminated != nil {
		cs.LastTerminationState.Terminated.StartedAt = prev.LastTerminationState.Terminated.StartedAt
		cs.LastTerminationState.Terminated.FinishedAt = prev.LastTerminationState.Terminated.FinishedAt
	}
}

func setCondition(st *corev1.PodStatus, typ corev1.PodConditionType, generation int64, now metav1.Time) {
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != typ {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			c.Status = corev1.ConditionTrue
			c.LastTransitionTime = now
		}
		c.Reason, c.Message = "", ""
		c.ObservedGeneration = generation
		return
	}
	st.Conditions = append(st.Conditions, corev1.PodCondition{
		Type: typ, Status: corev1.ConditionTrue, LastTransitionTime: now, ObservedGeneration: generation,
	})
}
