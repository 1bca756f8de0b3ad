//go:build e2e

package kind

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rancher/registration-engine/job/incluster/coredns"
)

// syncAnnotation is the CoreDNS pods' annotation a configSync writes: the
// coredns and coredns-custom resourceVersions it last handed the kubelet.
const syncAnnotation = "e2e.registration-engine/configmaps"

// configSync shortens one timer of a CoreDNS change, the kubelet's: a
// kubelet refreshes a pod's ConfigMap volumes whenever it syncs the pod,
// which it does on its own only every minute or so (syncFrequency, plus
// jitter), and at once when the pod changes. So whenever kube-system's
// coredns or coredns-custom ConfigMap changes, a configSync annotates every
// CoreDNS pod, and the files the pods read are the new ones within a
// second or two. CoreDNS's own timer, the reload plugin's check every
// 30 s ± 15 s, is left as it is, and so is every setting of the engine.
//
// TestKind's first registration runs before a configSync starts, at
// production timing end to end: it proves the handover wait's default
// covers the kubelet's real sync. The case without the handover wait
// pauses it until its Registration has failed, so the race it shows stays
// as wide as a real cluster's.
type configSync struct {
	t      *testing.T
	c      *kindCluster
	paused atomic.Bool // between pause and resume
	synced string      // the resourceVersions last handed on
	nudges int
}

// startConfigSync starts a configSync until the test ends.
func (c *kindCluster) startConfigSync(t *testing.T) *configSync {
	ctx, cancel := context.WithCancel(context.Background())
	s := &configSync{t: t, c: c}
	s.synced = s.versions(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait.UntilWithContext(ctx, s.sync, time.Second)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		t.Logf("the config sync annotated the CoreDNS pods %d times (after each change of coredns or coredns-custom)", s.nudges)
	})
	return s
}

// pause stops handing changes on until resume; a change made meanwhile is
// handed on at resume.
func (s *configSync) pause()  { s.paused.Store(true) }
func (s *configSync) resume() { s.paused.Store(false) }

// sync hands a change of the ConfigMaps since the last one on to the
// CoreDNS pods' kubelet.
func (s *configSync) sync(ctx context.Context) {
	if s.paused.Load() {
		return
	}
	v := s.versions(ctx)
	if v == "" || v == s.synced {
		return
	}
	if err := s.annotate(ctx, v); err != nil {
		if ctx.Err() == nil {
			s.t.Logf("config sync: %v (tries again)", err)
		}
		return
	}
	s.synced = v
	s.nudges++
}

// versions is "<coredns>/<coredns-custom>" by resourceVersion, "-" for a
// missing one; "" when the API server did not answer.
func (s *configSync) versions(ctx context.Context) string {
	var v [2]string
	for i, name := range []string{coredns.ConfigMap, coredns.CustomConfigMap} {
		cm, err := s.c.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			v[i] = "-"
		case err != nil:
			return ""
		default:
			v[i] = cm.ResourceVersion
		}
	}
	return v[0] + "/" + v[1]
}

// annotate writes versions onto every CoreDNS pod, which makes its kubelet
// sync it.
func (s *configSync) annotate(ctx context.Context, versions string) error {
	pods, err := s.c.cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, syncAnnotation, versions)
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, err := s.c.cs.CoreV1().Pods("kube-system").Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("annotate %s: %w", p.Name, err)
		}
	}
	return nil
}
