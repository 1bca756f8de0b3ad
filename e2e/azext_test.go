package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/e2e/controlplane"
	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/providers/azure"
)

// azureExtensionManager is a model of what Azure does with a Marketplace
// Kubernetes application's bundle when a customer creates, updates or
// deletes its cluster extension with the Azure CLI, taken from Microsoft's
// documentation (each behaviour cited where it is modelled) and, where the
// documentation is silent, the least favourable reading:
//
//   - az k8s-extension create/update/delete (azure-cli-extensions
//     src/k8s-extension, custom.py) create the same ARM resource,
//     Microsoft.KubernetesConfiguration/extensions, as the portal's
//     mainTemplate.json does; only the template passes its
//     configurationSettings ("Deploy … programmatically by using Azure CLI":
//     copy the configurationSettings section for later use).
//   - The extension manager installs the bundle's chart as a Helm release
//     named after the extension, in --release-namespace or else the
//     namespace of the extension type's registration (manifest.yaml's
//     extensionRegistrationParameters.namespace), atomically (a failed
//     install is rolled back), each configuration setting as a --set path.
//   - It injects global.azure.identity.clientId, .marketplace.planId and
//     .extension.resourceId for offers with the custom-meter billing model
//     only (Partner Center's Kubernetes application billing models), and
//     nothing for another model; never a publisher or an offer.
//   - update asks for confirmation, and without a terminal fails ("Use
//     --yes"); configuration settings merge over the extension's; protected
//     settings, when given, are the whole set ("if any are omitted, those
//     settings will be considered obsolete and deleted").
//   - delete uninstalls the release (asking for confirmation like update);
//     whether its post-delete hooks run is not documented: this model runs
//     them, and docs/uninstall.md says how to check that they did.
type azureExtensionManager struct {
	t     *testing.T
	plane *controlplane.Plane
	helm  string
	// chart is the staged bundle's chart; namespace its registration's;
	// version its version (manifest.yaml's), the one the release train has.
	chart, namespace, version string
	// subscription, and the client ID of the identity Azure gives each
	// extension (injected for the custom-meter model).
	subscription, identityClientID string
	// customMeter: the offer's billing model is custom-meter.
	customMeter bool
	extensions  map[string]*azureExtension
}

// azureExtension is Azure's record of one extension.
type azureExtension struct {
	id, namespace       string
	plan                string
	settings, protected map[string]string
}

// errNeedsYes is az's answer to an update or delete without --yes and
// without a terminal.
var errNeedsYes = errors.New("az: the command asks for confirmation and no terminal answers it: Use --yes")

// az runs one `az k8s-extension …` command line as a customer types it
// (quotes, line continuations), and returns helm's output.
func (m *azureExtensionManager) az(cmdline string) (string, error) {
	words, err := shellWords(cmdline)
	if err != nil {
		return "", err
	}
	if len(words) < 3 || words[0] != "az" || words[1] != "k8s-extension" {
		return "", fmt.Errorf("not an az k8s-extension command: %q", cmdline)
	}
	verb, flags := words[2], map[string][]string{}
	var last string
	for _, w := range words[3:] {
		if strings.HasPrefix(w, "--") {
			last = w
			if _, seen := flags[last]; !seen {
				flags[last] = nil // present, maybe without a value (--yes)
			}
			continue
		}
		if last == "" {
			return "", fmt.Errorf("az: unexpected %q", w)
		}
		flags[last] = append(flags[last], w)
	}
	one := func(f string) string {
		if v := flags[f]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	name, rg, cluster := one("--name"), one("--resource-group"), one("--cluster-name")
	if name == "" || rg == "" || cluster == "" || one("--cluster-type") != "managedClusters" {
		return "", fmt.Errorf("az: --name, --resource-group, --cluster-name and --cluster-type managedClusters are required: %q", cmdline)
	}
	_, yes := flags["--yes"]
	pairs := func(f string) (map[string]string, error) {
		out := map[string]string{}
		for _, kv := range flags[f] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, fmt.Errorf("az: %s takes key=value, got %q", f, kv)
			}
			out[k] = v
		}
		return out, nil
	}
	settings, err := pairs("--configuration-settings")
	if err != nil {
		return "", err
	}
	protected, err := pairs("--configuration-protected-settings")
	if err != nil {
		return "", err
	}
	switch verb {
	case "create":
		if m.extensions[name] != nil {
			return "", fmt.Errorf("az: extension %s exists", name)
		}
		ext := &azureExtension{
			id: "/subscriptions/" + m.subscription + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + cluster +
				"/providers/Microsoft.KubernetesConfiguration/extensions/" + name,
			namespace: cmpOr(one("--release-namespace"), m.namespace),
			plan:      one("--plan-name"), settings: settings, protected: protected,
		}
		if ext.plan == "" || one("--plan-publisher") == "" || one("--plan-product") == "" {
			return "", fmt.Errorf("az: a Marketplace extension needs --plan-name, --plan-publisher and --plan-product")
		}
		out, err := m.helmRun(append([]string{"install", name, m.chart, "--namespace", ext.namespace, "--atomic", "--timeout", "5m"}, m.values(ext)...)...)
		if err == nil {
			m.extensions[name] = ext
		}
		return out, err
	case "update":
		ext := m.extensions[name]
		if ext == nil {
			return "", fmt.Errorf("az: (ResourceNotFound) extension %s", name)
		}
		if !yes {
			return "", errNeedsYes
		}
		if v := one("--version"); v != "" && v != m.version {
			return "", fmt.Errorf("az: (VersionNotFound) version %s is not in the extension type's release train (it has %s)", v, m.version)
		}
		for k, v := range settings {
			ext.settings[k] = v
		}
		if _, given := flags["--configuration-protected-settings"]; given {
			ext.protected = protected
		}
		return m.helmRun(append([]string{"upgrade", name, m.chart, "--namespace", ext.namespace, "--reset-values", "--atomic", "--timeout", "5m"}, m.values(ext)...)...)
	case "delete":
		ext := m.extensions[name]
		if ext == nil {
			return "", fmt.Errorf("az: (ResourceNotFound) extension %s", name)
		}
		if !yes {
			return "", errNeedsYes
		}
		delete(m.extensions, name)
		return m.helmRun("uninstall", name, "--namespace", ext.namespace, "--wait", "--timeout", "5m")
	}
	return "", fmt.Errorf("az: k8s-extension %s is not modelled", verb)
}

// values are the --set flags of ext: what Azure injects, then its
// settings and protected settings (each a --set path).
func (m *azureExtensionManager) values(ext *azureExtension) []string {
	var set []string
	if m.customMeter {
		set = append(set, "global.azure.identity.clientId="+m.identityClientID, "global.azure.marketplace.planId="+ext.plan,
			"global.azure.extension.resourceId="+ext.id)
	}
	for _, kv := range []map[string]string{ext.settings, ext.protected} {
		keys := make([]string, 0, len(kv))
		for k := range kv {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			set = append(set, k+"="+kv[k])
		}
	}
	var args []string
	for _, s := range set {
		args = append(args, "--set-string", s)
	}
	// Not Azure's: the fake cloud's update servers listen on loopback,
	// which the CoreDNS admission policy admits only for a test install.
	// Without it the engine's CoreDNS edit is refused once the API server
	// has loaded the policy, which may or may not be before the first run.
	return append(args, "--set", "inClusterDNSTestLoopback=true")
}

func (m *azureExtensionManager) helmRun(args ...string) (string, error) {
	ctx := m.t.Context()
	out, err := testkit.Command(ctx, m.helm, append(args, "--kubeconfig", m.plane.AdminKubeconfig)...)
	return string(out), err
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// stageBundle runs manifests/marketplace/stage.sh as a publisher does and
// returns the staged chart and the namespace of the extension type's
// registration.
func stageBundle(t *testing.T, publisher, offer string) (chart, namespace, version string) {
	t.Helper()
	values, err := os.ReadFile(filepath.Join("..", "manifests", "marketplace", "values.yaml"))
	require.NoError(t, err)
	var v struct {
		RegionServers []string `json:"regionServers"`
	}
	require.NoError(t, yaml.Unmarshal(values, &v))
	// stage.sh checks each against its fingerprint in the list; the fake
	// cloud gives the pods its own (kubeletRedirects).
	certs := testkit.NewRegionServerCerts(t, v.RegionServers...)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join("..", "manifests", "marketplace", "stage.sh"), out)
	cmd.Env = append(os.Environ(), "REGISTRY_SERVER=marketplace.azurecr.io", "ENGINE_IMAGE=rancher/registration-engine",
		"ENGINE_DIGEST=sha256:"+strings.Repeat("0", 64), "OFFER_PUBLISHER_ID="+publisher, "OFFER_ID="+offer,
		"REGION_SERVER_CERTS="+certs.Dir, "REGION_SERVER_FINGERPRINTS="+certs.List)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	manifest, err := os.ReadFile(filepath.Join(out, "manifest.yaml"))
	require.NoError(t, err)
	var mf struct {
		Version string `json:"version"`
		Params  struct {
			Namespace string `json:"namespace"`
		} `json:"extensionRegistrationParameters"`
	}
	require.NoError(t, yaml.Unmarshal(manifest, &mf))
	require.NotEmpty(t, mf.Params.Namespace)
	return filepath.Join(out, "registration-engine"), mf.Params.Namespace, mf.Version
}

// docCommands are the commands of doc's ```sh blocks that start with
// prefix, each a whole command (continuation lines joined, a trailing
// comment dropped).
func docCommands(t *testing.T, doc, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", doc))
	require.NoError(t, err)
	var cmds []string
	in := false
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			in = true
			continue
		case strings.HasPrefix(line, "```"):
			in = false
			continue
		}
		if !in || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if i := strings.Index(line, "  # "); i >= 0 {
			line = line[:i]
		}
		cont := strings.HasSuffix(strings.TrimRight(line, " "), "\\")
		cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, " "), "\\"))
		if cont {
			continue
		}
		if c := strings.Join(strings.Fields(cur.String()), " "); strings.HasPrefix(c, prefix) {
			cmds = append(cmds, c)
		}
		cur.Reset()
	}
	require.NotEmpty(t, cmds, "docs/%s has a command starting %q", doc, prefix)
	return cmds
}

// placeholder is a <…> a doc's command leaves to the customer.
var placeholder = regexp.MustCompile(`<[^<>]+>`)

// fill replaces a command's placeholders with values; one it does not know
// fails the test (the doc would leave the customer guessing too).
func fill(t *testing.T, cmd string, values map[string]string) string {
	t.Helper()
	return placeholder.ReplaceAllStringFunc(cmd, func(p string) string {
		v, ok := values[p]
		require.True(t, ok, "the docs' command %q has a placeholder %s the test does not know", cmd, p)
		return v
	})
}

// shellWords splits a command line as a POSIX shell does for plain words
// and single or double quotes (no expansions: the docs' commands need
// none once filled in).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// TestAzureExtensionPaths runs the commands docs/install.md and
// docs/uninstall.md give a customer of the Marketplace offer, as written,
// through the model of Azure's extension manager (azureExtensionManager,
// custom-meter billing, the bundle staged by stage.sh), on a real
// kube-apiserver with the process kubelet and no person acting:
// az k8s-extension create as documented → the release's run registers;
// the documented update of the registration code → a run writes the new
// code; the documented hostNetwork update → applied to the CronJob; the
// documented version pin (docs/upgrade.md) → no run; the documented
// delete → the cleanup hook removed the engine's CoreDNS entry
// and Lease, nothing of the engine left acting, the Secret kept.
func TestAzureExtensionPaths(t *testing.T) {
	helm := testkit.Helm(t)
	t.Parallel()
	p, e, ctx := aksPlane(t, 5*time.Minute)
	c := harness.StartCloud(t)
	vars := c.Vars()
	id, err := azure.ParseExtensionID(vars["EXTENSION_RESOURCE_ID"])
	require.NoError(t, err, "the fake cloud's extension ID")
	sub, rg, cluster, extName := id.SubscriptionID, id.ResourceGroup, id.ClusterName, id.Name
	chart, namespace, version := stageBundle(t, vars["MARKETPLACE_PUBLISHER_ID"], vars["MARKETPLACE_OFFER_ID"])
	require.Equal(t, operator.Namespace, namespace, "the extension type's namespace is rancher/scc-operator's")
	model := &azureExtensionManager{t: t, plane: p, helm: helm, chart: chart, namespace: namespace, version: version, subscription: sub,
		identityClientID: fakecloud.DefaultAzureConfig().ManagedIdentityClientID, customMeter: true, extensions: map[string]*azureExtension{}}
	placeholders := map[string]string{
		"<group>": rg, "<cluster>": cluster, "<extension name>": extName, "<extension>": extName,
		"<the offer's extension type>": "SUSE.RegistrationEngine", "<publisher ID>": vars["MARKETPLACE_PUBLISHER_ID"],
		"<offer ID>": vars["MARKETPLACE_OFFER_ID"], "<plan ID>": vars["MARKETPLACE_PLAN_ID"], "<code>": chartRegCode,
		"<version>": version,
	}
	runs := e.StartKubelet(ctx, t, operator.Namespace, c)
	release := func() []releaseObject {
		return releaseObjects(t, runHelm(t, p, helm, "get", "manifest", extName, "--namespace", namespace))
	}

	// Install: the docs' az k8s-extension create, as written.
	create := fill(t, docCommands(t, "install.md", "az k8s-extension create")[0], placeholders)
	start := time.Now()
	_, err = model.az(create)
	require.NoError(t, err, create)
	first := runJobOf(t, release())
	pr := e.completedRun(ctx, t, runs, first)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"], pr.Res.String())
	harness.AssertRegistration(t, e.Secret(ctx, t), chartRegCode)
	t.Logf("proved: %s (docs/install.md, as written) through Azure's modelled extension manager (custom-meter injection, no mainTemplate.json) registered: run %s wrote %s %s after the command",
		create, first, operator.SecretName, time.Since(start).Round(time.Millisecond))

	// A new code: the docs' update of the protected setting. Without --yes
	// az stops at its confirmation, which a script cannot answer.
	setCode := docCommands(t, "install.md", "az k8s-extension update")
	var codeCmd, hostNetCmd string
	for _, cmd := range setCode {
		switch {
		case strings.Contains(cmd, "registrationCode=<code>"):
			codeCmd = cmd
		case strings.Contains(cmd, "hostNetwork=true"):
			hostNetCmd = cmd
		}
	}
	require.NotEmpty(t, codeCmd, "docs/install.md gives the command that sets the code")
	require.NotEmpty(t, hostNetCmd, "docs/install.md gives the command that sets hostNetwork")
	_, err = model.az(strings.Replace(fill(t, codeCmd, placeholders), " --yes", "", 1))
	require.ErrorIs(t, err, errNeedsYes, "the model asks for confirmation as az does")
	const newCode = "E2E-AZURE-CLI-CODE-2"
	placeholders["<code>"] = newCode
	start = time.Now()
	_, err = model.az(fill(t, codeCmd, placeholders))
	require.NoError(t, err)
	second := runJobOf(t, release())
	require.NotEqual(t, first, second, "a new code, a new run")
	pr = e.completedRun(ctx, t, runs, second)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"], pr.Res.String())
	harness.AssertRegistration(t, e.Secret(ctx, t), newCode)
	t.Logf("proved: %s (docs/install.md) started run %s, which wrote the new code into %s %s after the command",
		fill(t, codeCmd, placeholders), second, operator.SecretName, time.Since(start).Round(time.Millisecond))

	// hostNetwork on, the docs' way: applied, the code kept (Azure keeps
	// protected settings an update does not name).
	_, err = model.az(fill(t, hostNetCmd, placeholders))
	require.NoError(t, err)
	cj, err := e.Admin.BatchV1().CronJobs(namespace).Get(ctx, harness.CronJobName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, cj.Spec.JobTemplate.Spec.Template.Spec.HostNetwork, "hostNetwork applied to the CronJob's pods")
	assert.Equal(t, corev1.DNSClusterFirstWithHostNet, cj.Spec.JobTemplate.Spec.Template.Spec.DNSPolicy)
	code, err := e.Admin.CoreV1().Secrets(namespace).Get(ctx, "registration-code", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, newCode, string(code.Data["regCode"]), "the protected setting survived an update that did not name it")
	t.Logf("proved: %s (docs/install.md) set hostNetwork on the CronJob's pods (dnsPolicy %s), the registration code kept",
		fill(t, hostNetCmd, placeholders), cj.Spec.JobTemplate.Spec.Template.Spec.DNSPolicy)

	// Pinning the version, docs/upgrade.md's way: nothing a run reads
	// changes, so no run starts.
	pin := fill(t, docCommands(t, "upgrade.md", "az k8s-extension update")[0], placeholders)
	before := runJobOfOrEmpty(release())
	_, err = model.az(pin)
	require.NoError(t, err, pin)
	assert.Equal(t, before, runJobOfOrEmpty(release()), "a pin to the installed version starts no run")
	t.Logf("proved: %s (docs/upgrade.md) pinned the extension to version %s and started no run", pin, version)

	// Removal: the docs' az k8s-extension delete.
	require.NotEmpty(t, e.DNS.Lookup(ctx, harness.UpdateServer), "precondition: CoreDNS answers the update server's name")
	secret := e.Secret(ctx, t)
	del := fill(t, docCommands(t, "uninstall.md", "az k8s-extension delete")[0], placeholders)
	start = time.Now()
	_, err = model.az(del)
	require.NoError(t, err, del)
	took := time.Since(start)
	_, err = e.Admin.CoordinationV1().Leases(namespace).Get(ctx, harness.LeaseName, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the Lease went with the extension (err %v)", err)
	custom, err := e.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns-custom", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"log.override": "log\n"}, custom.Data, "the engine's CoreDNS entry gone, the customer's kept")
	cjs, err := e.Admin.BatchV1().CronJobs(namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	assert.Empty(t, cjs.Items, "no CronJob left acting")
	assert.Equal(t, secret.ResourceVersion, e.Secret(ctx, t).ResourceVersion, "the operator's Secret stays")
	t.Logf("proved: %s (docs/uninstall.md) removed the extension in %s: the cleanup hook removed the engine's CoreDNS entry and Lease, no CronJob left, %s kept",
		del, took.Round(time.Millisecond), operator.SecretName)

	// An install without a code, on a cluster that never registered: the
	// release's notes give the command that sets it, which runs as printed.
	require.NoError(t, e.Admin.CoreV1().Secrets(namespace).Delete(ctx, operator.SecretName, metav1.DeleteOptions{}))
	noCode := strings.Replace(create, " --configuration-protected-settings registrationCode="+chartRegCode, "", 1)
	require.NotEqual(t, create, noCode, "the docs' create sets the code as a protected setting")
	notes, err := model.az(noCode)
	require.NoError(t, err, noCode)
	waiting := e.completedRun(ctx, t, runs, runJobOf(t, release()))
	assert.Equal(t, job.OutcomeWaitingForCode, summary(t, waiting.Res.Stderr)["outcome"], waiting.Res.String())
	var notesCmd string
	for _, line := range strings.Split(notes, "\n") {
		if _, cmd, ok := strings.Cut(line, "Azure Marketplace: "); ok {
			notesCmd = cmd
		}
	}
	require.NotEmpty(t, notesCmd, "the notes of an install without a code say how to set it on Azure:\n%s", notes)
	const notesCode = "E2E-AZURE-NOTES-CODE-3"
	placeholders["<code>"] = notesCode
	start = time.Now()
	_, err = model.az(fill(t, notesCmd, placeholders))
	require.NoError(t, err, notesCmd)
	pr = e.completedRun(ctx, t, runs, runJobOf(t, release()))
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"], pr.Res.String())
	harness.AssertRegistration(t, e.Secret(ctx, t), notesCode)
	t.Logf("proved: an install without a code (%s) ran %s (waiting for a code); the release's notes' command, run as printed (%s), started run %s, which registered the code %s after the command",
		noCode, waiting.Job, notesCmd, pr.Job, time.Since(start).Round(time.Millisecond))
}

// portalSettings are the configurationSettings and
// configurationProtectedSettings of the bundle's mainTemplate.json as ARM
// evaluates them for the portal's answers (params, createUiDefinition.json's
// outputs) and Partner Center's variables (vars), in resource group rg of
// subscription sub: key=value pairs, each a --set path of the chart. Only
// the template functions the bundle uses are evaluated; another one fails
// the test, so a template change cannot slip past the model.
func portalSettings(t *testing.T, sub, rg string, vars, params map[string]string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "manifests", "marketplace", "mainTemplate.json"))
	require.NoError(t, err)
	var tmpl struct {
		Resources []struct {
			Properties struct {
				ConfigurationSettings          map[string]string `json:"configurationSettings"`
				ConfigurationProtectedSettings map[string]string `json:"configurationProtectedSettings"`
			} `json:"properties"`
		} `json:"resources"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tmpl))
	require.Len(t, tmpl.Resources, 1)
	ref := regexp.MustCompile(`^\[(variables|parameters)\('([^']+)'\)\]$`)
	const extensionID = "[extensionResourceId(resourceId('Microsoft.ContainerService/managedClusters', parameters('clusterResourceName')), 'Microsoft.KubernetesConfiguration/extensions', parameters('extensionResourceName'))]"
	eval := func(expr string) string {
		if expr == extensionID {
			return "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.ContainerService/managedClusters/" + params["clusterResourceName"] +
				"/providers/Microsoft.KubernetesConfiguration/extensions/" + params["extensionResourceName"]
		}
		m := ref.FindStringSubmatch(expr)
		require.NotNil(t, m, "mainTemplate.json: the model does not evaluate %s", expr)
		src := map[string]map[string]string{"variables": vars, "parameters": params}[m[1]]
		v, ok := src[m[2]]
		require.True(t, ok, "mainTemplate.json names %s('%s'), which the portal's answers do not give", m[1], m[2])
		return v
	}
	var out []string
	p := tmpl.Resources[0].Properties
	for _, settings := range []map[string]string{p.ConfigurationSettings, p.ConfigurationProtectedSettings} {
		for k, expr := range settings {
			out = append(out, k+"="+eval(expr))
		}
	}
	slices.Sort(out)
	return out
}

// TestParentChartPassesGlobalAzure installs the engine as SUSE's Rancher
// Prime PAYG offer installs its charts: through a deployer chart (SUSE's
// rancher-deployer-charts rancher-cloud) that is the Marketplace bundle's
// chart, carries the engine's chart as a subchart, and receives Azure's
// injected values at its own top level, global.azure.{enabled,
// identity.clientId, extension.resourceId, marketplace.planId}, which Helm
// hands every subchart as globals; the images are listed once, in the
// top-level global.azure.images. With nothing set for the engine but its
// registration code, the release's run registers.
func TestParentChartPassesGlobalAzure(t *testing.T) {
	helm := testkit.Helm(t)
	t.Parallel()
	p, e, ctx := aksPlane(t, 4*time.Minute)
	c := harness.StartCloud(t)
	vars := c.Vars()
	engine, _, _ := stageBundle(t, vars["MARKETPLACE_PUBLISHER_ID"], vars["MARKETPLACE_OFFER_ID"])

	// The deployer: its own Chart.yaml and values, the engine's staged
	// chart under charts/, Azure's placeholders at the top level.
	parent := filepath.Join(t.TempDir(), "deployer")
	require.NoError(t, os.MkdirAll(filepath.Join(parent, "charts"), 0o755))
	require.NoError(t, os.Rename(engine, filepath.Join(parent, "charts", "registration-engine")))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "Chart.yaml"), []byte("apiVersion: v2\nname: deployer\nversion: 1.0.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(parent, "values.yaml"), []byte(`global:
  azure:
    enabled: true
    identity:
      clientId: DONOTMODIFY
    marketplace:
      planId: DONOTMODIFY
    extension:
      resourceId: DONOTMODIFY
    images:
      engine:
        registry: marketplace.azurecr.io
        image: rancher/registration-engine
        digest: sha256:`+strings.Repeat("0", 64)+`
`), 0o644))
	runs := e.StartKubelet(ctx, t, operator.Namespace, c)
	start := time.Now()
	runHelm(t, p, helm, "install", "rancher-cloud", parent, "--namespace", operator.Namespace,
		// What Azure injects, at the deployer's level only.
		"--set", "global.azure.identity.clientId="+fakecloud.DefaultAzureConfig().ManagedIdentityClientID,
		"--set", "global.azure.extension.resourceId="+vars["EXTENSION_RESOURCE_ID"],
		"--set", "global.azure.marketplace.planId="+vars["MARKETPLACE_PLAN_ID"],
		// The deployer passes the customer's code to the engine.
		"--set", "registration-engine.registrationCode="+chartRegCode,
		"--set", "registration-engine.inClusterDNSTestLoopback=true")
	release := releaseObjects(t, runHelm(t, p, helm, "get", "manifest", "rancher-cloud", "--namespace", operator.Namespace))
	first := runJobOf(t, release)
	pr := e.completedRun(ctx, t, runs, first)
	assert.Equal(t, job.OutcomeRegistered, summary(t, pr.Res.Stderr)["outcome"], pr.Res.String())
	assert.Equal(t, "managed-identity", logLine(t, pr.Res.Stderr, "azure token acquired")["credentialMode"], "the identity Azure injected at the deployer's level")
	harness.AssertRegistration(t, e.Secret(ctx, t), chartRegCode)
	t.Logf("proved: installed as a subchart of a deployer chart that receives global.azure.{enabled,identity.clientId,extension.resourceId,marketplace.planId} and global.azure.images at its top level (SUSE's rancher-cloud), the release's run %s registered %s %s after helm install",
		first, operator.SecretName, time.Since(start).Round(time.Millisecond))
}

// aksPlane starts a control plane of its own with what an AKS cluster has
// before the Marketplace installs (aksBeforeInstall), and a context that
// ends after within or with the test.
func aksPlane(t *testing.T, within time.Duration, opts ...controlplane.Option) (*controlplane.Plane, *clusterEnv, context.Context) {
	t.Helper()
	p := controlplane.Start(t, opts...)
	e := &clusterEnv{&harness.Cluster{Plane: p, Admin: p.AdminClient(t), Settle: harness.ProcessSettle}}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	aksBeforeInstall(ctx, t, e)
	return p, e, ctx
}
