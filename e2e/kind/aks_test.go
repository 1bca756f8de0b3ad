//go:build e2e

package kind

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/job/incluster/coredns"
)

// aksCorefile is AKS's Corefile, as the engine's unit tests have it.
const aksCorefile = fakecloud.AKSCorefile

// aksUserKeys are a customer's own coredns-custom keys, which the engine
// must leave alone: an .override imported into the root block (no hosts:
// CoreDNS allows one hosts plugin per block) and a .server of its own.
var aksUserKeys = map[string]string{
	"customer.override": "log\n",
	"customer.server":   "corp.example:53 {\n    errors\n    whoami\n}\n",
}

// aksDNS makes the kind cluster's DNS look like AKS's: the coredns
// ConfigMap holds AKS's Corefile under the addon manager's Reconcile
// label, coredns-custom exists with the customer's keys, and the coredns
// Deployment mounts it (optional) at /etc/coredns/custom as AKS does. It
// waits until only pods with the mount serve, and returns the coredns
// ConfigMap's resourceVersion as it left it.
func (c *kindCluster) aksDNS(t *testing.T, ctx context.Context) string {
	t.Helper()
	cms := c.cs.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data = map[string]string{coredns.CorefileKey: aksCorefile}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["addonmanager.kubernetes.io/mode"] = "Reconcile"
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	custom := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: coredns.CustomConfigMap, Namespace: "kube-system",
		Labels: map[string]string{"addonmanager.kubernetes.io/mode": "EnsureExists"}}, Data: maps.Clone(aksUserKeys)}
	_, err = cms.Create(ctx, custom, metav1.CreateOptions{})
	require.NoError(t, err)

	deps := c.cs.AppsV1().Deployments("kube-system")
	d, err := deps.Get(ctx, coredns.Deployment, metav1.GetOptions{})
	require.NoError(t, err)
	spec := &d.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "custom-config-volume", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: coredns.CustomConfigMap}, Optional: ptr.To(true)}}})
	require.NotEmpty(t, spec.Containers)
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "custom-config-volume", MountPath: "/etc/coredns/custom", ReadOnly: true})
	d, err = deps.Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitRollout(t, ctx, c, d.Generation)
	return cm.ResourceVersion
}

func waitRollout(t *testing.T, ctx context.Context, c *kindCluster, gen int64) {
	t.Helper()
	deps := c.cs.AppsV1().Deployments("kube-system")
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, coredns.Deployment, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // the API server is busy: poll again
		}
		return rolledOut(d, gen), nil
	})
	require.NoError(t, err, "CoreDNS did not roll out with coredns-custom mounted")
}

func rolledOut(d *appsv1.Deployment, gen int64) bool {
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= gen && d.Status.UpdatedReplicas == want &&
		d.Status.ReadyReplicas == want && d.Status.Replicas == want
}

// addonManager stands in for AKS's addon manager: every few seconds it
// puts the coredns ConfigMap back to AKS's Corefile if anything changed it,
// as AKS does within about a minute. It counts what it reverted.
type addonManager struct {
	mu       sync.Mutex
	reverted []string // who changed it, from managedFields, each time
	stop     context.CancelFunc
	done     chan struct{}
}

func startAddonManager(ctx context.Context, c *kindCluster, every time.Duration) *addonManager {
	ctx, cancel := context.WithCancel(ctx)
	m := &addonManager{stop: cancel, done: make(chan struct{})}
	cms := c.cs.CoreV1().ConfigMaps("kube-system")
	go func() {
		defer close(m.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cm, err := cms.Get(ctx, coredns.ConfigMap, metav1.GetOptions{})
			if err != nil || (len(cm.Data) == 1 && cm.Data[coredns.CorefileKey] == aksCorefile) {
				continue
			}
			var who []string
			for _, f := range cm.ManagedFields {
				who = append(who, f.Manager)
			}
			cm.Data = map[string]string{coredns.CorefileKey: aksCorefile}
			if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
				continue
			}
			m.mu.Lock()
			m.reverted = append(m.reverted, strings.Join(who, ","))
			m.mu.Unlock()
		}
	}()
	return m
}

// Stop ends the stand-in and returns what it reverted.
func (m *addonManager) Stop() []string {
	m.stop()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reverted
}
