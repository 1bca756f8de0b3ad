package inclusterdns

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/providers/failure"
)

// CoreDNS objects in kube-system, as AKS, kind, k3s and kubeadm name them.
const (
	// CoreDNSCustom is AKS's ConfigMap for additions: each key ending in
	// .override is imported into the root server block. AKS reconciles the
	// coredns ConfigMap and reverts edits to it, so on AKS this is the only
	// place that lasts. The engine never creates it.
	CoreDNSCustom = "coredns-custom"
	// CoreDNSConfigMap holds the Corefile everywhere else.
	CoreDNSConfigMap = "coredns"
	// CorefileKey is the Corefile's key in CoreDNSConfigMap.
	CorefileKey = "Corefile"
	// CoreDNSDeployment is restarted after coredns-custom changes: CoreDNS
	// does not reload imported snippets on its own.
	CoreDNSDeployment = "coredns"
	// DefaultHostsKey is our key in coredns-custom. Nothing else may write
	// it: its whole value is replaced on every change.
	DefaultHostsKey = "registration-engine.override"

	// RestartedAtAnnotation is what kubectl rollout restart sets on the pod
	// template; setting it rolls the Deployment.
	RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
	// HostsHashAnnotation records, on CoreDNS's pod template, a hash of the
	// hosts block the running pods were restarted for. A restart that failed
	// after the ConfigMap was written leaves it stale, and the next run
	// restarts again instead of trusting the unchanged ConfigMap.
	HostsHashAnnotation = "registration-engine.cattle.io/hosts-sha256"
)

// CoreDNS makes the update server's name resolve, inside the cluster, to
// the address phase 5 chose. Public DNS does not resolve the update servers'
// names, yet the operator must connect to https://<name> for the certificate
// to match.
//
// On AKS (coredns-custom exists) the entry is a hosts block under Key, and
// CoreDNS is restarted when that block changed. Elsewhere the entry goes into
// the root server block of the Corefile, whose reload plugin picks it up; the
// Deployment is restarted only if the Corefile has no reload directive.
// Either way a run that finds the entry in place writes nothing.
type CoreDNS struct {
	ConfigMaps  kube.ConfigMapsGetter
	Deployments kube.DeploymentsGetter
	Namespace   string // default kube-system
	Key         string // key in coredns-custom; default DefaultHostsKey
	Clock       clock.PassiveClock
	Log         *slog.Logger

	// object is the ConfigMap the last Ensure found the entry's place in.
	object string
}

// Object names the ConfigMap (namespace/name) the last Ensure put the entry
// in, for messages about it; "" before the first Ensure.
func (c *CoreDNS) Object() string { return c.object }

// Ensure makes fqdn resolve to ip in the cluster and reports whether it
// changed CoreDNS's configuration. A failure means the Secret must not be
// written: the operator would be handed a name it cannot resolve.
func (c *CoreDNS) Ensure(ctx context.Context, fqdn string, ip netip.Addr) (changed bool, err error) {
	ns := cmp.Or(c.Namespace, "kube-system")
	fqdn, ip, err = validHostsEntry(fqdn, ip)
	if err != nil {
		return false, fmt.Errorf("coredns: %w", err)
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		changed, err = c.ensure(ctx, ns, fqdn, ip)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("coredns: %w", err)
	}
	return changed, nil
}

func (c *CoreDNS) ensure(ctx context.Context, ns, fqdn string, ip netip.Addr) (bool, error) {
	cms := c.ConfigMaps.ConfigMaps(ns)
	custom, err := cms.Get(ctx, CoreDNSCustom, metav1.GetOptions{})
	switch {
	case err == nil:
		c.object = ns + "/" + CoreDNSCustom
		return c.ensureCustom(ctx, ns, custom.ResourceVersion, custom.Data, fqdn, ip)
	case !apierrors.IsNotFound(err):
		return false, kube.APIError(err, needConfigMaps(ns))
	}

	core, err := cms.Get(ctx, CoreDNSConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, failure.Permanent(fmt.Errorf("%w: neither %s nor %s in %s; make %s resolve another way and set IN_CLUSTER_DNS=false", ErrNoCoreDNS, CoreDNSCustom, CoreDNSConfigMap, ns, fqdn))
	}
	if err != nil {
		return false, kube.APIError(err, needConfigMaps(ns))
	}
	c.object = ns + "/" + CoreDNSConfigMap
	old := core.Data[CorefileKey]
	next, err := SetCorefileHostsEntry(old, fqdn, ip)
	if err != nil {
		return false, failure.Permanent(fmt.Errorf("%s/%s: %w", ns, CoreDNSConfigMap, err))
	}
	if next == old {
		return false, nil
	}
	if err := patchConfigMapKey(ctx, cms, CoreDNSConfigMap, core.ResourceVersion, CorefileKey, next); err != nil {
		return false, kube.APIError(err, needConfigMaps(ns))
	}
	c.logger().Info("coredns corefile updated", slog.String("configMap", ns+"/"+CoreDNSConfigMap), slog.String("server", fqdn), slog.String("address", ip.String()))
	if !hasDirective(next, "reload") {
		if err := c.restart(ctx, ns, ""); err != nil {
			return true, err
		}
	}
	return true, nil
}

// ensureCustom writes our key in coredns-custom and restarts CoreDNS when
// the key changed, or when the running pods were not restarted for it.
func (c *CoreDNS) ensureCustom(ctx context.Context, ns, resourceVersion string, data map[string]string, fqdn string, ip netip.Addr) (bool, error) {
	key := cmp.Or(c.Key, DefaultHostsKey)
	want := hostsBlock("", fqdn, ip) + "\n"
	// CoreDNS refuses to start with two hosts directives in one server
	// block, and AKS imports every .override key into the root block.
	for k, v := range data {
		if k != key && strings.HasSuffix(k, ".override") && hasDirective(v, "hosts") {
			return false, failure.Permanent(fmt.Errorf("%w: %s/%s key %q already has a hosts block and CoreDNS allows one per server block; add %q to it by hand and set IN_CLUSTER_DNS=false", ErrCorefile, ns, CoreDNSCustom, k, ip.String()+" "+fqdn))
		}
	}
	changed := data[key] != want
	if changed {
		if err := patchConfigMapKey(ctx, c.ConfigMaps.ConfigMaps(ns), CoreDNSCustom, resourceVersion, key, want); err != nil {
			return false, kube.APIError(err, needConfigMaps(ns))
		}
		c.logger().Info("coredns-custom updated", slog.String("configMap", ns+"/"+CoreDNSCustom), slog.String("key", key), slog.String("server", fqdn), slog.String("address", ip.String()))
	}
	hash := hostsHash(want)
	if !changed {
		dep, err := c.Deployments.Deployments(ns).Get(ctx, CoreDNSDeployment, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, kube.APIError(err, needDeployment(ns))
		}
		if err == nil && dep.Spec.Template.Annotations[HostsHashAnnotation] == hash {
			return false, nil
		}
	}
	return changed, c.restart(ctx, ns, hash)
}

// restart rolls the CoreDNS Deployment the way kubectl rollout restart does.
func (c *CoreDNS) restart(ctx context.Context, ns, hash string) error {
	annotations := map[string]string{RestartedAtAnnotation: c.now().UTC().Format(time.RFC3339)}
	if hash != "" {
		annotations[HostsHashAnnotation] = hash
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": annotations}}}})
	if err != nil {
		return err
	}
	_, err = c.Deployments.Deployments(ns).Patch(ctx, CoreDNSDeployment, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager})
	if apierrors.IsNotFound(err) {
		return failure.Permanent(fmt.Errorf("%w: deployment %s/%s not found; CoreDNS must be restarted by hand to load the hosts entry", ErrNoCoreDNS, ns, CoreDNSDeployment))
	}
	if err != nil {
		return kube.APIError(err, needDeployment(ns))
	}
	c.logger().Info("coredns restarted", slog.String("deployment", ns+"/"+CoreDNSDeployment))
	return nil
}

func (c *CoreDNS) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

func (c *CoreDNS) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

// patchConfigMapKey merge-patches one data key, with the resourceVersion
// just read as a precondition: a concurrent edit of the same ConfigMap gets
// a conflict (and a re-read) instead of being overwritten.
func patchConfigMapKey(ctx context.Context, cms kube.ConfigMapInterface, name, resourceVersion, key, value string) error {
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta, "data": map[string]string{key: value}})
	if err != nil {
		return err
	}
	_, err = cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager})
	return err
}

func needConfigMaps(ns string) kube.Access {
	return kube.Access{Verbs: []string{"get", "update", "patch"}, Resource: "configmaps/" + CoreDNSCustom + " and configmaps/" + CoreDNSConfigMap, Namespace: ns}
}

func needDeployment(ns string) kube.Access {
	return kube.Access{Verbs: []string{"get", "patch"}, Resource: "deployments/" + CoreDNSDeployment, Namespace: ns}
}

func hostsHash(block string) string {
	sum := sha256.Sum256([]byte(block))
	return hex.EncodeToString(sum[:8])
}
