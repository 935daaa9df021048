package testenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kubelet stands in for the kubelet of one node, for a control plane
// whose kube-controller-manager runs the workload controllers (see
// devcluster.Options.Controllers): no container runs here, so it does
// what a kubelet would report of pods that run as they should. It
// registers a Ready node, binds every pod of the namespaces it is given
// to it (there is no scheduler), writes each pod's status (a pod a Job
// owns has succeeded, any other runs and is ready), and confirms a pod's
// deletion once asked, as a kubelet does once its containers stopped. The workload
// controllers then do the rest as on a real cluster: a Job completes
// (and a ttlSecondsAfterFinished deletes it), a Deployment becomes
// available, a StatefulSet ready.
type Kubelet struct {
	c          client.Client
	node       string
	namespaces map[string]bool
	mu         sync.Mutex
	stop       context.CancelFunc
	done       chan struct{}
}

// StartKubelet starts one, for the pods of namespaces (every namespace
// when none is given); it stops when the test ends.
func StartKubelet(t TB, cfg *rest.Config, namespaces ...string) *Kubelet {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatalf("kubelet: %v", err)
	}
	k := &Kubelet{c: c, node: Namespace("node"), namespaces: map[string]bool{}, done: make(chan struct{})}
	for _, ns := range namespaces {
		k.namespaces[ns] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.stop = cancel
	if err := k.register(ctx); err != nil {
		cancel()
		t.Fatalf("kubelet: registering node %s: %v", k.node, err)
	}
	go k.run(ctx)
	t.Cleanup(func() {
		cancel()
		<-k.done
		c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.node}})
	})
	return k
}

// Watch adds a namespace whose pods it runs.
func (k *Kubelet) Watch(ns string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.namespaces[ns] = true
}

func (k *Kubelet) register(ctx context.Context) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.node, Labels: map[string]string{"kubernetes.io/hostname": k.node, "kubernetes.io/os": "linux"}}}
	if err := k.c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return k.heartbeat(ctx)
}

// heartbeat reports the node Ready, with room for any pod.
func (k *Kubelet) heartbeat(ctx context.Context) error {
	n := &corev1.Node{}
	if err := k.c.Get(ctx, client.ObjectKey{Name: k.node}, n); err != nil {
		return err
	}
	now := metav1.Now()
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("1000")}
	n.Status.Capacity, n.Status.Allocatable = room, room
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
	if err := k.c.Status().Update(ctx, n); err != nil {
		return err
	}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-node-lease", Name: k.node}}
	holder, secs := k.node, int32(40)
	renew := metav1.NewMicroTime(time.Now())
	if err := k.c.Get(ctx, client.ObjectKeyFromObject(lease), lease); apierrors.IsNotFound(err) {
		lease.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew}
		return client.IgnoreAlreadyExists(k.c.Create(ctx, lease))
	} else if err != nil {
		return err
	}
	lease.Spec.RenewTime = &renew
	return k.c.Update(ctx, lease)
}

func (k *Kubelet) run(ctx context.Context) {
	defer close(k.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	beat := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(beat) > 10*time.Second {
			k.heartbeat(ctx)
			beat = time.Now()
		}
		var pods corev1.PodList
		if err := k.c.List(ctx, &pods); err != nil {
			continue
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			k.mu.Lock()
			mine := len(k.namespaces) == 0 || k.namespaces[p.Namespace]
			k.mu.Unlock()
			if !mine {
				continue
			}
			switch {
			case p.DeletionTimestamp != nil:
				// Its containers stopped: the kubelet confirms the
				// deletion (or the pod stays Terminating, and a
				// StatefulSet's next pod of its name never comes).
				if p.Spec.NodeName == k.node || p.Spec.NodeName == "" {
					k.c.Delete(ctx, p, client.GracePeriodSeconds(0))
				}
			case p.Spec.NodeName == "":
				k.bind(ctx, p)
			case p.Spec.NodeName == k.node && (p.Status.Phase == "" || p.Status.Phase == corev1.PodPending):
				k.start(ctx, p)
			}
		}
	}
}

// bind schedules a pod on the node, as the scheduler would.
func (k *Kubelet) bind(ctx context.Context, p *corev1.Pod) {
	b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: k.node}}
	k.c.SubResource("binding").Create(ctx, p, b)
}

// start reports a pod as a kubelet would once its containers ran: a Job's
// succeeded (exit code 0), any other's running and ready.
func (k *Kubelet) start(ctx context.Context, p *corev1.Pod) {
	now := metav1.Now()
	job := false
	for _, o := range p.OwnerReferences {
		job = job || o.Kind == "Job"
	}
	p.Status.HostIP, p.Status.PodIP = "127.0.0.1", fmt.Sprintf("10.1.%d.%d", now.Nanosecond()%250, now.Second()%250+1)
	p.Status.StartTime = &now
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now}
	}
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		if job {
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}
		} else {
			started := true
			cs.Ready, cs.Started, cs.State.Running = true, &started, &corev1.ContainerStateRunning{StartedAt: now}
		}
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
	}
	if job {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue), cond(corev1.PodInitialized, corev1.ConditionTrue),
			cond(corev1.ContainersReady, corev1.ConditionFalse), cond(corev1.PodReady, corev1.ConditionFalse)}
	} else {
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, corev1.ConditionTrue), cond(corev1.PodInitialized, corev1.ConditionTrue),
			cond(corev1.ContainersReady, corev1.ConditionTrue), cond(corev1.PodReady, corev1.ConditionTrue)}
	}
	k.c.Status().Update(ctx, p)
}
