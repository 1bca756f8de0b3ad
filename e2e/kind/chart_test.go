//go:build e2e

package kind

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/operator"
)

// chartRegCode is the registration code the chart's install carries, other
// than the overlay's, so the announce proves which install registered.
const chartRegCode = "CHART-REGISTRATION-CODE"

// fakecloudEnv are the overlay's settings that point the engine at the fake
// cloud's Service and at its files; the chart's install takes them as
// extraEnv.
var fakecloudEnv = []string{
	"AZURE_IMDS_ENDPOINT", "GCP_METADATA_ENDPOINTS", "AWS_IMDS_ENDPOINTS", "AIA_ALLOWED_HOSTS", "ARM_ENDPOINT",
	"REGION_SERVER_PORT", "UPDATE_SERVER_HTTPS_PORT", "UPDATE_SERVER_HTTP_PORT",
	"SSL_CERT_FILE", "ATTESTATION_ROOTS_FILE", "DMI_DIR_PATH",
}

// installChart removes the overlay's engine and installs
// manifests/chart/registration-engine as the Azure Marketplace does: the
// bundle's values (manifests/marketplace/values.yaml), what Azure injects
// (the extension's managed identity, its resource ID, the plan; the image,
// here the one loaded into the node), the customer's registration code.
// What only this test adds, in a values file of its own: the fake cloud's
// endpoints (extraEnv), its CA, attestation root and DMI files
// (extraVolumes), and its region server with its pinned certificate; and
// layout, the chart's coreDNSLayout.
// Values in override replace the top-level keys of the same name (a
// credential mode of its own, another registration code).
func (c *kindCluster) installChart(t *testing.T, ctx context.Context, layout string, override ...map[string]any) {
	t.Helper()
	// The overlay's settings are what the fake cloud in this cluster
	// serves: its extension and plan, its endpoints and files. A later
	// install finds the chart's CronJob gone and the overlay's replaced,
	// so they are read once.
	if c.overlayEnv == nil {
		cj, err := c.cs.BatchV1().CronJobs(operator.Namespace).Get(ctx, harness.CronJobName, metav1.GetOptions{})
		require.NoError(t, err)
		c.overlayEnv = map[string]string{}
		for _, e := range engineContainer(t, &cj.Spec.JobTemplate.Spec.Template.Spec).Env {
			c.overlayEnv[e.Name] = e.Value
		}
	}
	overlay := c.overlayEnv
	regionCert, err := c.cs.CoreV1().Services(operator.Namespace).ProxyGet("http", fakecloudName, "imds", "/fakecloud/files/certs/"+fakecloudHost+".pem", nil).DoRaw(ctx)
	require.NoError(t, err, "the fake region server's certificate")
	repo, image, ok := strings.Cut(c.s.image, ":")
	require.True(t, ok, "image %q has no tag", c.s.image)
	var extraEnv []map[string]string
	for _, k := range fakecloudEnv {
		require.NotEmpty(t, overlay[k], "the overlay's CronJob sets %s", k)
		extraEnv = append(extraEnv, map[string]string{"name": k, "value": overlay[k]})
	}
	values := map[string]any{
		"global": map[string]any{"azure": map[string]any{
			"identity":    map[string]any{"clientId": fakecloud.DefaultAzureConfig().ManagedIdentityClientID},
			"extension":   map[string]any{"resourceId": overlay["EXTENSION_RESOURCE_ID"]},
			"marketplace": map[string]any{"planId": overlay["MARKETPLACE_PLAN_ID"]},
			// Azure names its registry's copy by digest; kind has the
			// image loaded under its tag.
			"images": map[string]any{"engine": map[string]any{"registry": "", "image": repo, "digest": "", "tag": image}},
		}},
		"marketplace":      map[string]any{"publisherId": overlay["MARKETPLACE_PUBLISHER_ID"], "offerId": overlay["MARKETPLACE_OFFER_ID"]},
		"registrationCode": chartRegCode,
		// Which CoreDNS layout's grants the chart renders (aks, its
		// default, or corefile for kubeadm's, which kind has until the AKS
		// case makes it AKS's).
		"coreDNSLayout": layout,
		// The tests start runs themselves: a schedule that does not fire.
		"schedule":          "0 0 1 1 *",
		"regionServers":     []string{fakecloudHost},
		"regionServerCerts": map[string]string{fakecloudHost + ".pem": string(regionCert)},
		"extraEnv":          extraEnv,
		"extraVolumes": []map[string]any{
			{"name": "fakecloud-trust", "configMap": map[string]any{"name": "fakecloud-trust"}},
			{"name": "fakecloud-dmi", "configMap": map[string]any{"name": "fakecloud-dmi"}},
		},
		"extraVolumeMounts": []map[string]any{
			{"name": "fakecloud-trust", "mountPath": "/etc/fakecloud/trust", "readOnly": true},
			{"name": "fakecloud-dmi", "mountPath": "/etc/fakecloud/dmi", "readOnly": true},
		},
	}
	for _, o := range override {
		maps.Copy(values, o)
	}
	data, err := yaml.Marshal(values)
	require.NoError(t, err)
	dir := t.TempDir()
	file := filepath.Join(dir, "kind-values.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o600))

	root := filepath.Join("..", "..", "manifests")
	// helmCmd runs helm verb on the chart with both values files and
	// returns its stdout.
	helmCmd := func(verb string) []byte {
		return c.helm(t, ctx, verb, "registration-engine", filepath.Join(root, "chart", "registration-engine"),
			"--values", filepath.Join(root, "marketplace", "values.yaml"), "--values", file)
	}
	// What the chart renders with these values goes first, as on a
	// cluster that never had the overlay: helm install refuses to adopt
	// the objects the overlay (and copyTrust's region-server-certs)
	// created under the chart's names (the engine's CronJob,
	// ServiceAccount, RBAC, region server ConfigMaps). Derived from the
	// chart, the set covers a template the chart gains. The fake cloud,
	// its trust and DMI ConfigMaps are not the chart's and stay.
	rendered := helmCmd("template")
	c.kubectl(t, ctx, rendered, "delete", "-f", "-", "--ignore-not-found", "--wait")

	out := helmCmd("install")
	t.Logf("helm install: %s", strings.SplitN(string(out), "\n", 2)[0])

	_, err = c.cs.CoreV1().Secrets(operator.Namespace).Get(ctx, "registration-code", metav1.GetOptions{})
	require.NoError(t, err, "helm install did not create the chart's %s/registration-code Secret (registrationCode in the values)", operator.Namespace)
}

// helm runs the helm binary make e2e-kind built against this cluster, in
// the engine's namespace, with a home of its own, and returns its stdout.
func (c *kindCluster) helm(t *testing.T, ctx context.Context, args ...string) []byte {
	t.Helper()
	out, err := testkit.Command(ctx, testkit.Helm(t), append(args, "--namespace", operator.Namespace, "--kubeconfig", c.kubeconfig)...)
	require.NoError(t, err)
	return out
}

// uninstallChart removes the chart's release and waits for its objects to
// go, as a Marketplace uninstall does.
func (c *kindCluster) uninstallChart(t *testing.T, ctx context.Context) {
	t.Helper()
	out := c.helm(t, ctx, "uninstall", "registration-engine", "--wait")
	t.Logf("helm uninstall: %s", strings.TrimSpace(string(out)))
}

// statusFromNotes runs the status command the release's NOTES print
// (helm get notes), as an admin pastes it into a shell, and returns the
// verdict, the first line it printed.
func (c *kindCluster) statusFromNotes(t *testing.T, ctx context.Context) string {
	t.Helper()
	notes := string(c.helm(t, ctx, "get", "notes", "registration-engine"))
	var command string
	for _, line := range strings.Split(notes, "\n") {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, "kubectl ") && strings.Contains(line, " run registration-engine-status ") {
			command = line
		}
	}
	require.NotEmpty(t, command, "the NOTES print the status command:\n%s", notes)
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Env = []string{"PATH=" + filepath.Dir(c.s.kubectl) + ":/usr/bin:/bin", "KUBECONFIG=" + c.kubeconfig, "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
		err = nil // status's own exit code says the verdict's class; the line is what counts here
	}
	require.NoError(t, err)
	verdict, _, _ := strings.Cut(string(out), "\n")
	require.NotEmpty(t, verdict, "the command printed nothing (stderr: %s)", stderr)
	return verdict
}
