package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/operator"
)

// TestCleanupUnderTheHookAccess: `registration-engine cleanup` as the
// chart's post-delete hook runs it, under the hook's own ServiceAccount,
// with nothing but the access the chart gives that ServiceAccount (its
// Roles and the CoreDNS policy copy, rendered by helm template). The Roles
// arrive seconds after the process starts, as when an API server's
// authorizer has not seen them yet: the cleanup retries the refusals and
// then removes the engine's coredns-custom key, the customer's key kept,
// and the Lease.
func TestCleanupUnderTheHookAccess(t *testing.T) {
	t.Parallel()
	helm := testkit.Helm(t)
	p := controlplane.Start(t)
	admin := p.AdminClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operator.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Apply(t, []byte(harness.AKSCorednsFixture))
	customer := map[string]string{"log.override": "log\n"}
	data := map[string]string{coredns.DefaultHostsKey: "hosts {\n    203.0.113.7 smt-azure.susecloud.net\n    no_reverse\n    fallthrough\n}\n"}
	for k, v := range customer {
		data[k] = v
	}
	_, err = admin.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: coredns.CustomConfigMap}, Data: data}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoordinationV1().Leases(operator.Namespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: harness.LeaseName}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// The hook's objects but its Job: the ServiceAccount first, the rest
	// once the cleanup runs.
	chart := filepath.Join("..", "manifests", "chart", "registration-engine")
	out, err := testkit.Command(ctx, helm, "template", "registration-engine", chart, "--namespace", operator.Namespace,
		"--values", filepath.Join("..", "manifests", "testdata", "chart", "minimal.yaml"), "--show-only", "templates/cleanup-job.yaml")
	require.NoError(t, err)
	var account, access []string
	for _, doc := range strings.Split(string(out), "\n---\n") {
		switch {
		case strings.Contains(doc, "\nkind: ServiceAccount\n"):
			account = append(account, doc)
		case !strings.Contains(doc, "\nkind: Job\n"):
			access = append(access, doc)
		}
	}
	require.Len(t, account, 1)
	require.Len(t, access, 6, "two Roles, two RoleBindings, the policy copy and its binding")
	p.Apply(t, []byte(account[0]))
	token := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(token, []byte(p.ServiceAccountToken(t, operator.Namespace, "registration-engine-cleanup")), 0o600))

	wait, err := harness.StartEngine(ctx, []string{
		"KUBERNETES_SERVICE_HOST=" + p.Host, "KUBERNETES_SERVICE_PORT=" + p.Port,
		"KUBERNETES_TOKEN=" + token, "KUBERNETES_CA_CERT=" + p.CAFile,
		"POD_NAMESPACE=" + operator.Namespace, "POD_NAME=registration-engine-cleanup-x1", "LEASE_NAME=" + harness.LeaseName,
		"IN_CLUSTER_DNS=true", "UPDATE_SERVER_DOMAINS=susecloud.net",
	}, "cleanup")
	require.NoError(t, err)
	const late = 3 * time.Second
	time.Sleep(late)
	p.Apply(t, []byte(strings.Join(access, "\n---\n")))
	res, err := wait()
	require.NoError(t, err)
	require.Equal(t, 0, res.Code, res.String())

	var retried int
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(res.Stderr), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if strings.HasPrefix(rec["msg"].(string), "cleanup: refused; retrying") {
			retried++
		}
		last = rec
	}
	assert.Positive(t, retried, "refused before its Roles arrived:\n%s", res.Stderr)
	assert.Equal(t, "cleanup finished", last["msg"], res.Stderr)
	assert.Equal(t, coredns.DefaultHostsKey, last["removedKey"])
	assert.Equal(t, true, last["leaseDeleted"])
	custom, err := admin.CoreV1().ConfigMaps("kube-system").Get(ctx, coredns.CustomConfigMap, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, customer, custom.Data, "the engine's key gone, the customer's kept")
	_, err = admin.CoordinationV1().Leases(operator.Namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Lease is gone (err %v)", err)
	t.Logf("proved: under the hook's own ServiceAccount, with only the chart's hook Roles and policy copy (applied %s after it started), registration-engine cleanup retried %d refusal(s), then removed coredns-custom key %s (the customer's key kept) and the Lease, exit 0 in %s",
		late, retried, coredns.DefaultHostsKey, res.Took.Round(time.Millisecond))
}
