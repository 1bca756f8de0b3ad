package coredns

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/kube"
)

// CoreDNS objects in kube-system, as AKS, kind, k3s and kubeadm name them.
const (
	// CustomConfigMap is AKS's ConfigMap for additions: each key ending in
	// .override is imported into the root server block. AKS reconciles the
	// coredns ConfigMap and reverts edits to it, so on AKS this is the only
	// place that lasts. The engine never creates it.
	CustomConfigMap = "coredns-custom"
	// ConfigMap holds the Corefile everywhere else.
	ConfigMap = "coredns"
	// CorefileKey is the Corefile's key in ConfigMap.
	CorefileKey = "Corefile"
	// Deployment runs CoreDNS. The engine never touches it: the
	// reload plugin loads every change the engine makes (see Editor).
	Deployment = "coredns"
	// DefaultHostsKey is our key in coredns-custom. Nothing else may write
	// it: its whole value is replaced on every change.
	DefaultHostsKey = "registration-engine.override"
)

// Editor makes the update server's name resolve, inside the cluster, to
// the address the update server answered its health check on (phase 4's
// race; phase 5 reports it). Public DNS does not resolve the update servers'
// names, yet the operator must connect to https://<name> for the certificate
// to match.
//
// On AKS (coredns-custom exists) the entry is a hosts block under Key;
// elsewhere it goes into the root server block of the Corefile. Either way
// CoreDNS's reload plugin picks the change up once the kubelet has synced
// the ConfigMap into the pods: it hashes the Corefile with every file it
// imports, so an edited coredns-custom key counts too. CoreDNS is never
// restarted, so the engine needs no write access to its Deployment, which
// would let a stolen token run another image in kube-system. A Corefile
// without reload is refused (ErrNoReload) before anything is written.
// A run that finds the entry in place writes nothing. A server block of
// its own for a zone that covers the name (a coredns-custom .server key
// such as "susecloud.net:53 {") would answer instead of the entry: refused
// with ErrCorefile before anything is written.
type Editor struct {
	ConfigMaps kube.ConfigMapsGetter
	Namespace  string // default kube-system
	Key        string // key in coredns-custom; default DefaultHostsKey
	// Domains is UPDATE_SERVER_DOMAINS. In the Corefile layout an entry
	// the engine wrote for another name under them, an update server no
	// longer chosen, is removed when the entry is placed
	// (SetCorefileHostsEntry); nil removes none. In coredns-custom the
	// engine's key is replaced whole, so its earlier entry goes anyway.
	Domains []string
	// ClusterRanges is CLUSTER_ADDRESS_RANGES, the chart's
	// clusterAddressRanges, which the admission policy reads too: in the
	// Corefile layout an entry for an address in them goes only into a
	// hosts block with no_reverse (SetCorefileHostsEntry). nil means
	// DefaultClusterRanges; a range the policy has and this lacks lets the
	// engine try a write the policy refuses with HTTP 422.
	ClusterRanges []netip.Prefix
	Log           *slog.Logger
}

// Edit is what Ensure did: the ConfigMap (namespace/name) that holds the
// entry, whether this call changed it, and the engine's earlier entries it
// removed ("<ip> <name>", for update servers no longer chosen).
type Edit struct {
	Object  string
	Changed bool
	Removed []string
}

// Ensure makes fqdn resolve to ip in the cluster and reports which
// ConfigMap holds the entry and whether it changed CoreDNS's configuration.
// A failure means the Secret must not be written: the operator would be
// handed a name it cannot resolve.
func (c *Editor) Ensure(ctx context.Context, fqdn string, ip netip.Addr) (Edit, error) {
	ns := cmp.Or(c.Namespace, "kube-system")
	fqdn, ip, err := validHostsEntry(fqdn, ip)
	if err != nil {
		return Edit{}, fmt.Errorf("coredns: %w", err)
	}
	var edit Edit
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		edit, err = c.ensure(ctx, ns, fqdn, ip)
		return err
	})
	if err != nil {
		return Edit{}, fmt.Errorf("coredns: %w", err)
	}
	return edit, nil
}

func (c *Editor) ensure(ctx context.Context, ns, fqdn string, ip netip.Addr) (Edit, error) {
	cms := c.ConfigMaps.ConfigMaps(ns)
	custom, err := cms.Get(ctx, CustomConfigMap, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return Edit{}, kube.APIError(err, needConfigMaps(ns))
	}
	hasCustom := err == nil

	core, err := cms.Get(ctx, ConfigMap, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && hasCustom:
		// AKS always has both; without the Corefile there is no telling
		// whether CoreDNS reloads, and the engine cannot restart it.
		c.logger().Warn("coredns-custom without a coredns ConfigMap: cannot check that CoreDNS reloads it", slog.String("configMap", ns+"/"+ConfigMap))
		core = nil
	case apierrors.IsNotFound(err):
		return Edit{}, failure.Permanent(fmt.Errorf("%w: neither %s nor %s in %s; make %s resolve another way and set IN_CLUSTER_DNS=false", ErrNoCoreDNS, CustomConfigMap, ConfigMap, ns, fqdn))
	case err != nil:
		return Edit{}, kube.APIError(err, needConfigMaps(ns))
	}
	if core != nil && !hasDirective(core.Data[CorefileKey], "reload") {
		return Edit{}, failure.Permanent(fmt.Errorf("%w: the Corefile in %s/%s has no reload directive, so CoreDNS would serve %s only after a restart; add reload to it, or %s", ErrNoReload, ns, ConfigMap, fqdn, byHand(fqdn, ip)))
	}
	key := c.key()
	if hasCustom && core != nil && !importsKey(core.Data[CorefileKey], key) {
		// A coredns-custom that CoreDNS never reads (AKS's and k3s's
		// Corefiles import its .override keys; a kubeadm Corefile beside a
		// stray coredns-custom does not): an entry there would never be
		// served, so it goes where this CoreDNS looks, the Corefile.
		c.logger().Warn("coredns-custom exists but the Corefile imports none of its .override keys into the root server block: writing the entry into the Corefile", slog.String("configMap", ns+"/"+CustomConfigMap), slog.String("key", key), slog.String("corefile", ns+"/"+ConfigMap))
		hasCustom = false
	}
	if hasCustom {
		changed, removed, err := c.ensureCustom(ctx, ns, custom.ResourceVersion, custom.Data, fqdn, ip)
		return Edit{Object: ns + "/" + CustomConfigMap, Changed: changed, Removed: removed}, err
	}

	edit := Edit{Object: ns + "/" + ConfigMap}
	old := core.Data[CorefileKey]
	next, removed, err := SetCorefileHostsEntry(old, fqdn, ip, c.Domains, c.ClusterRanges)
	if err != nil {
		return Edit{}, failure.Permanent(fmt.Errorf("%s/%s: %w", ns, ConfigMap, err))
	}
	if next == old {
		return edit, nil
	}
	if err := patchConfigMapKey(ctx, cms, ConfigMap, core.ResourceVersion, CorefileKey, next); err != nil {
		if refused := policyRefused(err, ns+"/"+ConfigMap, fqdn, ip, lineCount(next)); refused != nil {
			return Edit{}, refused
		}
		return Edit{}, kube.APIError(err, needCorefile(ns))
	}
	c.logger().Info("coredns corefile updated", slog.String("configMap", ns+"/"+ConfigMap), slog.String("server", fqdn), slog.String("address", ip.String()), removedAttr(removed))
	edit.Changed, edit.Removed = true, removed
	return edit, nil
}

// ensureCustom writes our key in coredns-custom when it differs, and
// reports the entries for other names the key held before (the whole value
// is replaced).
func (c *Editor) ensureCustom(ctx context.Context, ns, resourceVersion string, data map[string]string, fqdn string, ip netip.Addr) (bool, []string, error) {
	key := c.key()
	want := hostsBlock("", fqdn, ip) + "\n"
	// AKS imports every .server key at the top level of the Corefile, as
	// server blocks of their own, and the .override keys (ours) into the
	// root block. A server block whose zone covers fqdn answers for it
	// instead, so the entry would never be served: refused now, not after
	// HANDOVER_TIMEOUT's wait for an answer that cannot come.
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if !strings.HasSuffix(k, ".server") {
			continue
		}
		for i, l := range parseCorefile(data[k]) {
			if l.depth != 0 || l.opens == 0 {
				continue
			}
			if zone := coveringServerZone(l, fqdn); zone != "" {
				return false, nil, failure.Permanent(fmt.Errorf("%w: %s/%s key %q has the server block %q (line %d), which answers for %s instead of the root server block where AKS imports %q; remove that zone from %q or narrow it so that it no longer covers %s, or add %q to that server block by hand and set IN_CLUSTER_DNS=false",
					ErrCorefile, ns, CustomConfigMap, k, zone, i+1, fqdn, key, k, fqdn, ip.String()+" "+fqdn))
			}
		}
	}
	// CoreDNS refuses to start with two hosts directives in one server
	// block, and AKS imports every .override key into the root block. SUSE's
	// Python engine's key, holding only its own block, is taken over: its
	// entries go in the same edit that writes ours.
	var takeOver []string
	for k, v := range data {
		if k == key || !strings.HasSuffix(k, ".override") || !hasDirective(v, "hosts") {
			continue
		}
		if entries, ok := pythonEngineEntries(v, c.Domains); ok && k == PythonEngineKey && key != PythonEngineKey {
			takeOver = entries
			continue
		}
		return false, nil, failure.Permanent(fmt.Errorf("%w: %s/%s key %q already has a hosts block and CoreDNS allows one per server block; add %q to it by hand and set IN_CLUSTER_DNS=false", ErrCorefile, ns, CustomConfigMap, k, ip.String()+" "+fqdn))
	}
	if data[key] == want && takeOver == nil {
		return false, nil, nil
	}
	patch := map[string]*string{key: &want}
	if takeOver != nil {
		patch[PythonEngineKey] = nil // removed: its entry is ours now
	}
	if err := patchConfigMapKeys(ctx, c.ConfigMaps.ConfigMaps(ns), CustomConfigMap, resourceVersion, patch); err != nil {
		if refused := policyRefused(err, ns+"/"+CustomConfigMap, fqdn, ip, lineCount(want)); refused != nil {
			return false, nil, refused
		}
		return false, nil, kube.APIError(err, kube.Access{Verbs: []string{"patch"}, Resource: "configmaps/" + CustomConfigMap, Namespace: ns})
	}
	var removed []string
	lines := parseCorefile(data[key])
	for i, l := range lines {
		if len(l.fields) > 0 && l.fields[0] == "hosts" {
			end := blockEnd(lines, i)
			if end < 0 {
				end = len(lines)
			}
			for _, e := range hostsEntries(lines, i, end) {
				if !slices.ContainsFunc(e.names, func(n string) bool { return sameHost(n, fqdn) }) {
					removed = append(removed, e.addr.String()+" "+strings.Join(e.names, " "))
				}
			}
		}
	}
	if takeOver != nil {
		c.logger().Info("took over SUSE's Python engine's coredns-custom key: its entries replaced by the engine's, the key removed",
			slog.String("configMap", ns+"/"+CustomConfigMap), slog.String("removedKey", PythonEngineKey), slog.Any("itsEntries", takeOver))
		for _, e := range takeOver {
			if f := strings.Fields(e); !slices.ContainsFunc(f[1:], func(n string) bool { return sameHost(n, fqdn) }) {
				removed = append(removed, e)
			}
		}
	}
	c.logger().Info("coredns-custom updated", slog.String("configMap", ns+"/"+CustomConfigMap), slog.String("key", key), slog.String("server", fqdn), slog.String("address", ip.String()), removedAttr(removed))
	return true, removed, nil
}

// removedAttr is the log attribute of the earlier entries an edit removed;
// none when it removed none (slog drops the zero Attr).
func removedAttr(removed []string) slog.Attr {
	if len(removed) == 0 {
		return slog.Attr{}
	}
	return slog.Any("removed", removed)
}

func (c *Editor) logger() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// PolicyName is the ValidatingAdmissionPolicy the manifests ship, which
// admits only the engine's own edits of CoreDNS's configuration.
const PolicyName = "registration-engine-coredns"

// policyRefused turns the API server's refusal of an edit by the engine's
// admission policy (422, "ValidatingAdmissionPolicy '…' … denied request")
// into a permanent error that says what refused it and what to do; nil
// for any other error. The policy admits only lines the engine writes, so
// an edit it refuses is one the engine must not make alone (a hosts block
// shared in a way the engine does not recognise, or a policy older than
// the engine). A refusal because the policy's expressions ran out of the
// API server's CEL cost budget says nothing of the edit: it is the
// Corefile's length (ErrPolicyCostLimit), and the remedy differs.
func policyRefused(err error, object, fqdn string, ip netip.Addr, lines int) error {
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		return nil
	}
	if policyOutOfBudget(err) {
		return failure.Permanent(fmt.Errorf("%w: the admission policy could not check the engine's edit of %s within the API server's CEL cost limit (%v); the policy supports a Corefile of up to %d lines and this one has %d: move long hosts lists into a file the hosts plugin reads (hosts FILE {…}), or %s",
			ErrPolicyCostLimit, object, err, PolicyMaxLines, lines, byHand(fqdn, ip)))
	}
	return failure.Permanent(fmt.Errorf("%w: the admission policy refused the engine's edit of %s (%v); the policy admits only the engine's own hosts entries, so this configuration needs a person: %s, or install the policy of this engine's release if it is older (manifests/base/coredns-policy.yaml, the chart's template)",
		ErrPolicyRefused, object, err, byHand(fqdn, ip)))
}

// PolicyMaxLines is the longest Corefile (or coredns-custom key) the
// admission policy is proven to check within the API server's CEL cost
// limits on the oldest Kubernetes the engine supports (e2e
// TestCoreDNSAdmissionPolicyLongCorefile). README "Security" states it.
const PolicyMaxLines = 1000

// policyOutOfBudget reports whether a policy refusal is the API server
// giving up on the policy's cost rather than the policy denying the edit.
// The API server says so only in text: the StatusError's reason is Invalid
// either way and its cause carries the same message. The texts are
// k8s.io/apiserver's: "validation failed due to running out of cost
// budget" (the policy's total budget; pkg/admission/plugin/cel
// activation.go, which Kubernetes's own metrics match by prefix) and cel-go's
// "actual cost limit exceeded" (one expression's limit). This is the one
// place that matches them.
func policyOutOfBudget(err error) bool {
	texts := []string{err.Error()}
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			texts = append(texts, c.Message)
		}
	}
	for _, t := range texts {
		if strings.Contains(t, "running out of cost budget") || strings.Contains(t, "cost limit exceeded") {
			return true
		}
	}
	return false
}

// key is the engine's key in coredns-custom.
func (c *Editor) key() string { return cmp.Or(c.Key, DefaultHostsKey) }

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

// patchConfigMapKeys merge-patches several data keys at once, a nil value
// removing its key, with the resourceVersion just read as a precondition
// (see patchConfigMapKey).
func patchConfigMapKeys(ctx context.Context, cms kube.ConfigMapInterface, name, resourceVersion string, data map[string]*string) error {
	meta := map[string]any{}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta, "data": data})
	if err != nil {
		return err
	}
	_, err = cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager})
	return err
}

// needConfigMaps is the read every run makes, in both layouts.
func needConfigMaps(ns string) kube.Access {
	return kube.Access{Verbs: []string{"get"}, Resource: "configmaps/" + CustomConfigMap + " and configmaps/" + ConfigMap, Namespace: ns}
}

// needCorefile is the patch of the Corefile layout, which AKS's (the chart's
// default) does not grant: on AKS coredns-custom exists and coredns is only
// read, so this Role is missing only where coredns-custom is absent.
func needCorefile(ns string) kube.Access {
	return kube.Access{Verbs: []string{"patch"}, Resource: "configmaps/" + ConfigMap +
		" (a cluster without coredns-custom: install with the chart's coreDNSLayout=corefile, or add manifests/base/corefile-layout)", Namespace: ns}
}

// lineCount is the number of lines of text, a final newline ending the
// last one.
func lineCount(text string) int {
	return strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1
}
