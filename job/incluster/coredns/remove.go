package coredns

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/rancher/registration-engine/job/kube"
)

// Removal is what Remove took out of CoreDNS's configuration: the engine's
// key in coredns-custom (its whole hosts block), and the entries it had
// written into the Corefile ("<ip> <name>"). Both empty: nothing of the
// engine's was there.
type Removal struct {
	CustomKey string
	Corefile  []string
}

// Remove takes the engine's hosts entries out of CoreDNS's configuration,
// for an uninstall: once the engine is gone nobody would move the update
// server's name when SUSE moves the server, and every pod of the cluster
// would keep resolving it to the address of the last run.
//
// It removes only what the engine writes, in both layouts, whichever the
// cluster has: the engine's key in coredns-custom (Key), and in the
// Corefile's root hosts block the entries of exactly the engine's shape
// for names under Domains (earlierEntry). The customer's keys and lines
// stay byte for byte, and so does the frame of a hosts block the engine
// added ("hosts {", its ttl and fallthrough): the admission policy admits
// the engine's removal of its own lines only, and a block that answers
// nothing but CoreDNS's own /etc/hosts and falls through changes no answer.
// CoreDNS's reload plugin drops the entries within about two minutes.
//
// A ConfigMap that is absent, or that the engine may not patch (the aks
// layout grants no patch of the Corefile), is left alone: the error says
// which, and the other is still cleaned.
func (c *Editor) Remove(ctx context.Context) (Removal, error) {
	ns := cmp.Or(c.Namespace, "kube-system")
	var (
		out  Removal
		errs []error
	)
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		out.CustomKey, err = c.removeCustom(ctx, ns)
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("coredns: %s/%s: %w", ns, CustomConfigMap, err))
	}
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var err error
		out.Corefile, err = c.removeCorefile(ctx, ns)
		return err
	}); err != nil {
		errs = append(errs, fmt.Errorf("coredns: %s/%s: %w", ns, ConfigMap, err))
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	return out, nil
}

func (c *Editor) removeCustom(ctx context.Context, ns string) (string, error) {
	cms := c.ConfigMaps.ConfigMaps(ns)
	custom, err := cms.Get(ctx, CustomConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", kube.APIError(err, needConfigMaps(ns))
	}
	key := c.key()
	if _, ok := custom.Data[key]; !ok {
		return "", nil
	}
	// JSON merge patch: null deletes the key; the resourceVersion makes a
	// concurrent edit conflict instead of being overwritten.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": custom.ResourceVersion},
		"data":     map[string]any{key: nil},
	})
	if err != nil {
		return "", err
	}
	if _, err := cms.Patch(ctx, CustomConfigMap, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
		if apierrors.IsConflict(err) {
			return "", err
		}
		return "", kube.APIError(err, kube.Access{Verbs: []string{"patch"}, Resource: "configmaps/" + CustomConfigMap, Namespace: ns})
	}
	c.logger().Info("coredns-custom key removed", slog.String("configMap", ns+"/"+CustomConfigMap), slog.String("key", key))
	return key, nil
}

func (c *Editor) removeCorefile(ctx context.Context, ns string) ([]string, error) {
	cms := c.ConfigMaps.ConfigMaps(ns)
	core, err := cms.Get(ctx, ConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, kube.APIError(err, needConfigMaps(ns))
	}
	old := core.Data[CorefileKey]
	next, removed := RemoveCorefileHostsEntries(old, c.Domains, c.ClusterRanges)
	if len(removed) == 0 {
		return nil, nil
	}
	if err := patchConfigMapKey(ctx, cms, ConfigMap, core.ResourceVersion, CorefileKey, next); err != nil {
		if apierrors.IsConflict(err) {
			return nil, err
		}
		return nil, kube.APIError(err, needCorefile(ns))
	}
	c.logger().Info("coredns corefile entries removed", slog.String("configMap", ns+"/"+ConfigMap), removedAttr(removed))
	return removed, nil
}

// RemoveCorefileHostsEntries returns corefile without the entries the
// engine writes (SetCorefileHostsEntry) in its root server block's hosts
// block: lines of exactly the engine's shape for names under domains
// (earlierEntry), and those names among the block's zones where an earlier
// run added them. removed lists the entries as they were ("<ip> <name>");
// none removed returns corefile unchanged. Every other line stays byte for
// byte; nil domains remove nothing. ranges are CLUSTER_ADDRESS_RANGES (nil:
// DefaultClusterRanges), as SetCorefileHostsEntry takes them: an entry at
// an address in them in a block that answers reverse queries is not the
// engine's, and the admission policy would refuse its removal.
func RemoveCorefileHostsEntries(corefile string, domains []string, ranges []netip.Prefix) (next string, removed []string) {
	lines := parseCorefile(corefile)
	root, rootEnd := -1, -1
	for i, l := range lines {
		if l.depth == 0 && l.opens == 1 && l.closes == 0 && strings.HasSuffix(l.code, "{") && isRootServerBlock(l) {
			root, rootEnd = i, blockEnd(lines, i)
			break
		}
	}
	if root < 0 || rootEnd < 0 {
		return corefile, nil
	}
	hosts, hostsEnd := -1, -1
	for i := root + 1; i < rootEnd; i++ {
		if l := lines[i]; l.depth == 1 && len(l.fields) > 0 && l.fields[0] == "hosts" {
			if l.opens == 1 && l.closes == 0 && strings.HasSuffix(l.code, "{") {
				hosts, hostsEnd = i, blockEnd(lines, i)
			}
			break
		}
	}
	if hosts < 0 || hostsEnd < 0 {
		return corefile, nil
	}
	drop := map[int]bool{}
	var names []string
	blockNoReverse := noReverse(lines, hosts, hostsEnd)
	for i, e := range hostsEntries(lines, hosts, hostsEnd) {
		if earlierEntry(lines, hosts, i, e, domains, ranges, blockNoReverse) {
			drop[i] = true
			removed = append(removed, strings.TrimSpace(lines[i].text))
			names = append(names, e.names[0])
		}
	}
	if len(removed) == 0 {
		return corefile, nil
	}
	out := make([]string, 0, len(lines))
	for i, l := range lines {
		switch {
		case drop[i]:
		case i == hosts:
			out = append(out, withoutHostsZones(l.text, names, ""))
		default:
			out = append(out, l.text)
		}
	}
	return strings.Join(out, "\n"), slices.Clip(removed)
}
