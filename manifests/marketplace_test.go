package manifests

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/internal/testkit"
)

// bundleManifest is the CNAB manifest.yaml container-package-app reads;
// decoding is strict, so a misspelt field fails.
type bundleManifest struct {
	ApplicationName                 string `json:"applicationName"`
	Publisher                       string `json:"publisher"`
	Description                     string `json:"description"`
	Version                         string `json:"version"`
	HelmChart                       string `json:"helmChart"`
	ClusterArmTemplate              string `json:"clusterArmTemplate"`
	UIDefinition                    string `json:"uiDefinition"`
	RegistryServer                  string `json:"registryServer"`
	ExtensionRegistrationParameters struct {
		DefaultScope          string   `json:"defaultScope"`
		Namespace             string   `json:"namespace"`
		SupportedClusterTypes []string `json:"supportedClusterTypes,omitempty"`
	} `json:"extensionRegistrationParameters"`
}

// armTemplate is the part of mainTemplate.json the tests read.
type armTemplate struct {
	Schema         string `json:"$schema"`
	ContentVersion string `json:"contentVersion"`
	Parameters     map[string]struct {
		Type          string          `json:"type"`
		DefaultValue  json.RawMessage `json:"defaultValue"`
		AllowedValues []string        `json:"allowedValues"`
		Metadata      map[string]any  `json:"metadata"`
	} `json:"parameters"`
	Variables map[string]string `json:"variables"`
	Resources []struct {
		Type       string            `json:"type"`
		APIVersion string            `json:"apiVersion"`
		Name       string            `json:"name"`
		Scope      string            `json:"scope"`
		Plan       map[string]string `json:"plan"`
		Properties struct {
			ExtensionType           string `json:"extensionType"`
			AutoUpgradeMinorVersion bool   `json:"autoUpgradeMinorVersion"`
			ReleaseTrain            string `json:"releaseTrain"`
			Scope                   struct {
				Cluster struct {
					ReleaseNamespace string `json:"releaseNamespace"`
				} `json:"cluster"`
			} `json:"scope"`
			ConfigurationSettings          map[string]string `json:"configurationSettings"`
			ConfigurationProtectedSettings map[string]string `json:"configurationProtectedSettings"`
		} `json:"properties"`
	} `json:"resources"`
	Outputs map[string]any `json:"outputs"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(data)))
	require.NoError(t, dec.Decode(v), "%s is valid JSON", path)
	require.False(t, dec.More(), "%s: one JSON value", path)
}

func loadMainTemplate(t *testing.T) armTemplate {
	var tmpl armTemplate
	readJSON(t, "marketplace/mainTemplate.json", &tmpl)
	require.Len(t, tmpl.Resources, 1, "only the cluster extension: a Kubernetes-app template may create nothing else")
	return tmpl
}

func loadBundleManifest(t *testing.T) bundleManifest {
	data, err := os.ReadFile("marketplace/manifest.yaml")
	require.NoError(t, err)
	var m bundleManifest
	require.NoError(t, yaml.UnmarshalStrict(data, &m))
	return m
}

func TestMarketplaceManifest(t *testing.T) {
	m := loadBundleManifest(t)
	assert.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, m.Version, "container-package-app demands #.#.#")
	assert.NotEmpty(t, m.ApplicationName)
	assert.NotEmpty(t, m.Publisher)
	assert.NotEmpty(t, m.Description)
	assert.NotEmpty(t, m.RegistryServer)
	assert.Equal(t, "./registration-engine", m.HelmChart, "the chart directory stage.sh writes, unpacked")
	assert.Equal(t, "./mainTemplate.json", m.ClusterArmTemplate)
	assert.Equal(t, "./createUiDefinition.json", m.UIDefinition)
	assert.Equal(t, "cluster", m.ExtensionRegistrationParameters.DefaultScope)
	assert.Equal(t, chartNamespace, m.ExtensionRegistrationParameters.Namespace, "rancher/scc-operator reads its Secret there")
	tmpl := loadMainTemplate(t)
	assert.Equal(t, m.ExtensionRegistrationParameters.Namespace, tmpl.Resources[0].Properties.Scope.Cluster.ReleaseNamespace)
}

// armRef matches the ARM template functions the tests follow.
var armRef = regexp.MustCompile(`(parameters|variables)\('([^']+)'\)`)

func TestMarketplaceMainTemplate(t *testing.T) {
	tmpl := loadMainTemplate(t)
	assert.Equal(t, "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#", tmpl.Schema)

	// Partner Center fills these in when it publishes the plan; anything
	// else here would be overwritten or, worse, published.
	assert.Equal(t, map[string]string{
		"plan-name": "DONOTMODIFY", "plan-publisher": "DONOTMODIFY", "plan-offerID": "DONOTMODIFY",
		"releaseTrain": "DONOTMODIFY", "clusterExtensionTypeName": "DONOTMODIFY",
	}, tmpl.Variables)

	ext := tmpl.Resources[0]
	assert.Equal(t, "Microsoft.KubernetesConfiguration/extensions", ext.Type)
	assert.Equal(t, "2024-11-01", ext.APIVersion)
	assert.Equal(t, map[string]string{
		"name": "[variables('plan-name')]", "publisher": "[variables('plan-publisher')]", "product": "[variables('plan-offerID')]",
	}, ext.Plan, "the plan the engine verifies is the one Partner Center sells")
	assert.Equal(t, "[variables('clusterExtensionTypeName')]", ext.Properties.ExtensionType)
	assert.Equal(t, "[variables('releaseTrain')]", ext.Properties.ReleaseTrain)
	assert.Contains(t, ext.Scope, "Microsoft.ContainerService/managedClusters/")

	// The plan's publisher and offer reach the engine: Azure injects neither.
	assert.Equal(t, "[variables('plan-publisher')]", ext.Properties.ConfigurationSettings["marketplace.publisherId"])
	assert.Equal(t, "[variables('plan-offerID')]", ext.Properties.ConfigurationSettings["marketplace.offerId"])
	assert.Equal(t, "[parameters('registrationCode')]", ext.Properties.ConfigurationProtectedSettings["registrationCode"])
	assert.Equal(t, "securestring", tmpl.Parameters["registrationCode"].Type, "never shown in the deployment's history")

	// Every reference resolves, and every parameter is used.
	data, err := os.ReadFile("marketplace/mainTemplate.json")
	require.NoError(t, err)
	used := map[string]bool{}
	for _, m := range armRef.FindAllStringSubmatch(string(data), -1) {
		switch m[1] {
		case "parameters":
			assert.Contains(t, tmpl.Parameters, m[2], "parameters('%s')", m[2])
			used[m[2]] = true
		case "variables":
			assert.Contains(t, tmpl.Variables, m[2], "variables('%s')", m[2])
		}
	}
	for p := range tmpl.Parameters {
		assert.True(t, used[p], "parameter %s is never used", p)
	}
	mode := tmpl.Parameters["credentialMode"]
	assert.ElementsMatch(t, []string{"managed-identity", "workload-identity"}, mode.AllowedValues, "the chart's azure.credentialMode values")
}

// Every settings key is a Helm --set path to a value the bundle's chart
// really has, and a protected key is a simple name.
func TestMarketplaceSettingsResolveToChartValues(t *testing.T) {
	ext := loadMainTemplate(t).Resources[0]
	chartValues := readValues(t, filepath.Join(chartDir, "values.yaml"))
	bundleValues := readValues(t, "marketplace/values.yaml")
	keys := slices.Collect(maps.Keys(ext.Properties.ConfigurationSettings))
	for k := range ext.Properties.ConfigurationProtectedSettings {
		assert.Regexp(t, `^[A-Za-z0-9]+$`, k, "protected settings need simple key names")
		keys = append(keys, k)
	}
	require.NotEmpty(t, keys)
	for _, k := range keys {
		for name, values := range map[string]map[string]any{"chart values.yaml": chartValues, "marketplace/values.yaml": bundleValues} {
			v, ok := lookup(values, k)
			if assert.True(t, ok, "%s: no such value in %s", k, name) {
				_, isMap := v.(map[string]any)
				assert.False(t, isMap, "%s in %s is a map; a setting must name a leaf", k, name)
			}
		}
	}
}

func readValues(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, yaml.Unmarshal(data, &v), path)
	return v
}

// lookup follows a Helm --set path (dots separate keys; `\.` is a dot in
// a key).
func lookup(values map[string]any, path string) (any, bool) {
	parts := strings.Split(strings.ReplaceAll(path, `\.`, "\x00"), ".")
	var cur any = values
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[strings.ReplaceAll(p, "\x00", ".")]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// flatten lists every leaf of values as path → value.
func flatten(prefix string, v any, out map[string]any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		out[prefix] = v
		return
	}
	for k, e := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, e, out)
	}
}

// The bundle's values.yaml is the chart's plus global.azure and the
// Marketplace's own settings, nothing else: a default changed in the chart
// must change in the bundle too.
func TestMarketplaceValuesAreTheChartsPlusAzure(t *testing.T) {
	chart, bundle := map[string]any{}, map[string]any{}
	flatten("", readValues(t, filepath.Join(chartDir, "values.yaml")), chart)
	flatten("", readValues(t, "marketplace/values.yaml"), bundle)
	differ := map[string]bool{
		"azure.workloadIdentity.clientId": true, "azure.workloadIdentity.tenantId": true, "azure.extensionResourceId": true,
		"marketplace.publisherId": true, "marketplace.offerId": true, "marketplace.planId": true,
		// The Marketplace takes linux/amd64 images only.
		"architectures": true,
	}
	assert.Equal(t, []any{"amd64"}, bundle["architectures"], "the bundle's image is linux/amd64 only: its pod must not land on an arm64 node")
	assert.Equal(t, []any{"amd64", "arm64"}, chart["architectures"], "the chart's default: both architectures make image builds")
	for _, k := range slices.Sorted(maps.Keys(chart)) {
		if differ[k] {
			continue
		}
		assert.Contains(t, bundle, k, "marketplace/values.yaml lacks the chart's %s", k)
		if _, ok := bundle[k]; ok {
			assert.Equal(t, chart[k], bundle[k], "marketplace/values.yaml: %s differs from the chart's", k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(bundle)) {
		if _, ok := chart[k]; !ok {
			assert.True(t, strings.HasPrefix(k, "global.azure."), "marketplace/values.yaml: %s is not a chart value", k)
		}
	}
	// What Azure injects at deployment, shipped as DONOTMODIFY.
	for _, k := range []string{"global.azure.identity.clientId", "global.azure.marketplace.planId", "global.azure.extension.resourceId"} {
		assert.Equal(t, "DONOTMODIFY", bundle[k], k)
	}
	for _, k := range []string{"registry", "image", "digest"} {
		assert.Contains(t, bundle, "global.azure.images.engine."+k)
	}
}

// createUiDefinition.json's outputs are exactly mainTemplate.json's
// parameters (ARM refuses an unknown parameter; a missing required one
// fails the deployment).
func TestMarketplaceUIDefinition(t *testing.T) {
	var ui struct {
		Schema     string `json:"$schema"`
		Handler    string `json:"handler"`
		Version    string `json:"version"`
		Parameters struct {
			Config  map[string]any    `json:"config"`
			Basics  []any             `json:"basics"`
			Steps   []map[string]any  `json:"steps"`
			Outputs map[string]string `json:"outputs"`
		} `json:"parameters"`
	}
	readJSON(t, "marketplace/createUiDefinition.json", &ui)
	assert.Equal(t, "Microsoft.Azure.CreateUIDef", ui.Handler)
	assert.Equal(t, "0.1.2-preview", ui.Version)
	tmpl := loadMainTemplate(t)
	for out := range ui.Parameters.Outputs {
		assert.Contains(t, tmpl.Parameters, out, "output %s is no parameter of mainTemplate.json", out)
	}
	for name, p := range tmpl.Parameters {
		if p.DefaultValue == nil {
			assert.Contains(t, ui.Parameters.Outputs, name, "required parameter %s is not an output", name)
		}
	}
	assert.Contains(t, ui.Parameters.Outputs, "registrationCode")
	assert.Contains(t, ui.Parameters.Outputs, "credentialMode")

	// The registration code is required, and the portal refuses what the
	// chart and the engine would refuse (white space inside, a
	// placeholder's <, $ or {) before the deployment starts.
	var field map[string]any
	for _, step := range ui.Parameters.Steps {
		elements, _ := step["elements"].([]any)
		for _, e := range elements {
			if m, ok := e.(map[string]any); ok && m["name"] == "registrationCode" {
				field = m
			}
		}
	}
	require.NotNil(t, field, "a registrationCode field")
	constraints, _ := field["constraints"].(map[string]any)
	assert.Equal(t, true, constraints["required"], "the portal requires the code")
	pattern, _ := constraints["regex"].(string)
	re, err := regexp.Compile(pattern)
	require.NoError(t, err)
	for code, want := range map[string]bool{
		"ABC-123": true, " ABC-123 ": true, "INTERNAL-USE-ONLY-1a2b-3c4d": true, "7F3A9C": true,
		"": false, "ABC 123": false, "ABC-123\nDEF": false, "<registration-code>": false, "${REGCODE}": false, "{{.Values.registrationCode}}": false,
	} {
		assert.Equal(t, want, re.MatchString(code), "portal regex on %q", code)
	}
	assert.NotEmpty(t, constraints["validationMessage"])
}

// stage.sh assembles what container-package-app reads; the staged chart lints
// and renders on its own, and with mainTemplate.json's settings applied the
// way Azure applies them (--set paths), it renders the Marketplace install.
func TestMarketplaceStagedBundle(t *testing.T) {
	helmBin(t) // without helm: skipped before staging (a failure under CI)
	out := t.TempDir()
	digest := "sha256:" + strings.Repeat("cd", 32)
	cmd := exec.Command("marketplace/stage.sh", out)
	certs := regionServerCerts(t)
	cmd.Env = stageEnv(certs.Dir, certs.List) // ENGINE_DIGEST=digest
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", b)
	assert.Contains(t, string(b), fmt.Sprintf("stage: %d region server certificate(s) match their fingerprints in %s\n", len(bundleRegionServers(t)), certs.List))
	for _, server := range bundleRegionServers(t) {
		assert.FileExists(t, filepath.Join(out, "registration-engine", "certs", server+".pem"), "the bundle's chart carries every region server's certificate")
	}

	m := loadBundleManifest(t)
	assert.DirExists(t, filepath.Join(out, m.HelmChart), "an unpacked chart, no .tgz")
	for _, p := range []string{m.ClusterArmTemplate, m.UIDefinition, filepath.Join(m.HelmChart, "Chart.yaml")} {
		assert.FileExists(t, filepath.Join(out, p))
	}
	staged, err := os.ReadFile(filepath.Join(out, "manifest.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(staged), "registryServer: \"suse.azurecr.io\"")
	assert.NotContains(t, string(staged), "@")

	chart := filepath.Join(out, "registration-engine")
	helmLint(t, chart)

	// As Azure installs it: its injected values, and the ARM template's
	// settings with Partner Center's variables filled in and ARM's
	// functions evaluated for resource group g of subscription s.
	vars := map[string]string{"plan-name": "premium", "plan-publisher": "suse", "plan-offerID": "sles-15-sp7"}
	managed := map[string]string{"clusterResourceName": "c", "extensionResourceName": "e", "credentialMode": "managed-identity", "workloadIdentityClientId": "", "workloadIdentityTenantId": "", "registrationCode": "CODE-FROM-THE-PORTAL"}
	ext := loadMainTemplate(t).Resources[0]
	settings := func(params map[string]string) []string {
		resolve := func(expr string) string {
			if strings.HasPrefix(expr, "[extensionResourceId(") {
				// extensionResourceId(resourceId('…/managedClusters', cluster), '…/extensions', extension)
				require.Equal(t, "[extensionResourceId(resourceId('Microsoft.ContainerService/managedClusters', parameters('clusterResourceName')), 'Microsoft.KubernetesConfiguration/extensions', parameters('extensionResourceName'))]", expr)
				return "/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/" + params["clusterResourceName"] +
					"/providers/Microsoft.KubernetesConfiguration/extensions/" + params["extensionResourceName"]
			}
			m := armRef.FindStringSubmatch(expr)
			require.NotNil(t, m, expr)
			if m[1] == "variables" {
				return vars[m[2]]
			}
			return params[m[2]]
		}
		var set []string
		for k, expr := range ext.Properties.ConfigurationSettings {
			set = append(set, k+"="+resolve(expr))
		}
		for k, expr := range ext.Properties.ConfigurationProtectedSettings {
			set = append(set, k+"="+resolve(expr))
		}
		return set
	}
	// What Azure Arc's cluster agent passes every extension chart; AKS's
	// extension manager may do the same.
	arc := []string{
		"Azure.Cluster.ResourceId=/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c",
		"Azure.Cluster.Region=westeurope", "Azure.Extension.Name=e",
		"Azure.Extension.ResourceId=/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/e",
		"Azure.proxySettings.isProxyEnabled=false", "enabled=true",
	}
	const explicitID = "/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/e"
	tests := map[string]struct {
		set      []string
		wantMode string
		wantID   string
	}{
		"with the injected values":                   {set: append(settings(managed), azureInjected...), wantMode: "managed-identity", wantID: explicitID},
		"with the injected values and Arc's Azure.*": {set: slices.Concat(settings(managed), azureInjected, arc), wantMode: "managed-identity", wantID: explicitID},
		// Partner Center documents global.azure.* for the custom-meter
		// billing model only: without them the plan and the extension's ID
		// come from mainTemplate.json, and a Workload Identity reads them.
		"no injection at all": {set: settings(map[string]string{"clusterResourceName": "c", "extensionResourceName": "e", "credentialMode": "workload-identity",
			"workloadIdentityClientId": "9b2f3c1d-0000-4000-8000-0000000000aa", "workloadIdentityTenantId": "9b2f3c1d-0000-4000-8000-0000000000bb", "registrationCode": "CODE-FROM-THE-PORTAL"}),
			wantMode: "workload-identity", wantID: explicitID},
		// az k8s-extension create runs no mainTemplate.json: only what
		// Azure injects (the custom-meter model the bundle needs) and the
		// protected setting reach the chart; the publisher and offer come
		// from the staged bundle itself.
		"az k8s-extension create: Azure's injection and the bundle's own offer": {set: append(slices.Clone(azureInjected), "registrationCode=CODE-FROM-THE-PORTAL"),
			wantMode: "managed-identity", wantID: explicitID},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := splitObjects(t, helmTemplate(t, chart, nil, tc.set...))
			_, c := chartCronJob(t, objs)
			assert.Equal(t, "suse.azurecr.io/rancher/registration-engine@"+digest, c.Image)
			e := env(c)
			got := map[string]string{}
			for _, k := range []string{"AZURE_CREDENTIAL_MODE", "MARKETPLACE_PUBLISHER_ID", "MARKETPLACE_OFFER_ID", "MARKETPLACE_PLAN_ID", "EXTENSION_RESOURCE_ID"} {
				got[k] = e[k].Value
			}
			assert.Equal(t, map[string]string{
				"AZURE_CREDENTIAL_MODE": tc.wantMode, "MARKETPLACE_PUBLISHER_ID": "suse", "MARKETPLACE_OFFER_ID": "sles-15-sp7",
				"MARKETPLACE_PLAN_ID": "premium", "EXTENSION_RESOURCE_ID": tc.wantID,
			}, got)
			if tc.wantMode == "managed-identity" {
				assert.Equal(t, injectedClientID, e["AZURE_CLIENT_ID"].Value)
			}
			secret := renderedAs[*corev1.Secret](t, objs, "Secret/"+chartNamespace+"/registration-code")
			assert.Equal(t, "CODE-FROM-THE-PORTAL", string(secret.Data["regCode"]), "the protected setting becomes the registration-code Secret")
			require.NotNil(t, e["REGISTRATION_CODE"].ValueFrom)
			require.NotNil(t, e["REGISTRATION_CODE"].ValueFrom.SecretKeyRef)
			assert.Equal(t, secret.Name, e["REGISTRATION_CODE"].ValueFrom.SecretKeyRef.Name, "which the CronJob reads")
		})
	}

	// The portal's default identity on an offer Azure injects nothing for
	// (another billing model than custom-meter): refused at render, with
	// the reason and the two ways out, instead of an install whose every
	// run stops at load.
	t.Run("managed identity, nothing injected", func(t *testing.T) {
		_, err := helmTemplateErr(helmBin(t), chart, nil, settings(managed)...)
		require.Error(t, err)
		msg := helmStderr(err)
		assert.Contains(t, msg, "Azure did not inject it: Azure injects it only for offers published with the custom-meter billing model")
		assert.Contains(t, msg, "Choose workload-identity")
		assert.NotContains(t, msg, "rendered outside Azure")
	})
	// container-package-app renders the staged chart with nothing
	// injected and no settings: it renders.
	t.Run("as container-package-app renders it", func(t *testing.T) {
		objs := splitObjects(t, helmTemplate(t, chart, nil))
		_, c := chartCronJob(t, objs)
		e := env(c)
		assert.Equal(t, "suse", e["MARKETPLACE_PUBLISHER_ID"].Value, "the staged offer")
		assert.Equal(t, "sles-15-sp7", e["MARKETPLACE_OFFER_ID"].Value)
		assert.Equal(t, "DONOTMODIFY", e["MARKETPLACE_PLAN_ID"].Value, "Azure fills it in at deployment")
	})

	// An injection that disagrees with what the bundle passes is refused,
	// naming both: the engine would verify another plan or extension.
	for name, override := range map[string]string{
		"plan":      "global.azure.marketplace.planId=basic",
		"extension": "global.azure.extension.resourceId=/subscriptions/s/resourceGroups/g/providers/Microsoft.ContainerService/managedClusters/c/providers/Microsoft.KubernetesConfiguration/extensions/other",
	} {
		t.Run("an injected "+name+" that disagrees", func(t *testing.T) {
			_, err := helmTemplateErr(helmBin(t), chart, nil, slices.Concat(settings(managed), azureInjected, []string{override})...)
			require.Error(t, err)
			assert.Contains(t, helmStderr(err), "(passed by the bundle's mainTemplate.json)")
		})
	}
}

// bundleRegionServers is regionServers of the bundle's values.yaml.
func bundleRegionServers(t *testing.T) []string {
	t.Helper()
	var servers []string
	for _, s := range readValues(t, "marketplace/values.yaml")["regionServers"].([]any) {
		servers = append(servers, s.(string))
	}
	require.NotEmpty(t, servers)
	return servers
}

// regionServerCerts is a directory as regionServiceCertsAzure installs it,
// <server>.pem for each of the bundle's region servers (certificates made
// for the test), and the fingerprint list naming them.
func regionServerCerts(t *testing.T) testkit.RegionServerCerts {
	t.Helper()
	return testkit.NewRegionServerCerts(t, bundleRegionServers(t)...)
}

// stageEnv is the environment stage.sh is run with: a publisher's
// settings, the certificates of certs and the list given (none: the
// repository's).
func stageEnv(certs, list string) []string {
	env := append(os.Environ(), "REGISTRY_SERVER=suse.azurecr.io", "ENGINE_IMAGE=rancher/registration-engine",
		"ENGINE_DIGEST=sha256:"+strings.Repeat("cd", 32), "REGION_SERVER_CERTS="+certs, "OFFER_PUBLISHER_ID=suse", "OFFER_ID=sles-15-sp7")
	if list != "" {
		env = append(env, "REGION_SERVER_FINGERPRINTS="+list)
	}
	return env
}

// A bundle staged without the region servers' certificates would skip every
// region server on every run, and a Marketplace install has no manual step
// to add them: stage.sh refuses it, naming the servers, and leaves no chart
// behind for cpa to package.
func TestMarketplaceStageRefusesMissingCertificates(t *testing.T) {
	servers := bundleRegionServers(t)
	partial := regionServerCerts(t)
	require.NoError(t, os.Remove(filepath.Join(partial.Dir, servers[1]+".pem")))
	notPEM := regionServerCerts(t)
	require.NoError(t, os.WriteFile(filepath.Join(notPEM.Dir, servers[0]+".pem"), []byte("not a certificate\n"), 0o644))
	tests := map[string]struct {
		certs   testkit.RegionServerCerts
		missing []string
	}{
		"none (the repository ships none)": {missing: servers},
		"one missing":                      {certs: partial, missing: servers[1:2]},
		"one that is no PEM certificate":   {certs: notPEM, missing: servers[:1]},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := t.TempDir()
			cmd := exec.Command("marketplace/stage.sh", out)
			cmd.Env = stageEnv(tc.certs.Dir, tc.certs.List)
			b, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "%s", b)
			assert.Equal(t, 2, exit.ExitCode())
			assert.Contains(t, string(b), "refusing the bundle: no certificate <server>.pem for region server(s) "+strings.Join(tc.missing, " ")+";")
			assert.NoDirExists(t, filepath.Join(out, "registration-engine"))
		})
	}
}

// The region servers' certificates are the engine's only trust in them: a
// bundle carries exactly those the fingerprint list names, each under the
// file name it is listed for (the engine pins server <entry> to
// <entry>.pem). stage.sh refuses any other, naming the file, its
// fingerprint and how to list a new one, and a listed one that is missing;
// the refused bundle leaves no chart behind.
func TestMarketplaceStageChecksFingerprints(t *testing.T) {
	servers := bundleRegionServers(t)
	first, second := servers[0]+".pem", servers[1]+".pem"
	tests := map[string]struct {
		// change makes the certificates or the list differ, and returns
		// the fingerprint of the certificate it made, if it made one.
		change func(t *testing.T, c testkit.RegionServerCerts) (newFP string)
		// repositorys: stage against the repository's list.
		repositorys bool
		// want are lines of the refusal, with FP(name) replaced by name's
		// fingerprint as the test computed it.
		want []string
	}{
		"a certificate the list does not name": {
			change: func(t *testing.T, c testkit.RegionServerCerts) string {
				other, fp := testkit.SelfSignedCert(t, servers[0])
				require.NoError(t, os.WriteFile(filepath.Join(c.Dir, first), other, 0o644))
				return fp
			},
			want: []string{"stage: refusing the bundle: " + first + " holds a certificate whose SHA-256 fingerprint FP(new) is not listed for " + first + " in LIST\n",
				"stage: refusing the bundle: " + first + " does not hold the certificate LIST lists for it, SHA-256 fingerprint FP(" + first + ") (generated by the test for " + servers[0] + ")\n"},
		},
		"an extra certificate": {
			change: func(t *testing.T, c testkit.RegionServerCerts) string {
				extra, fp := testkit.SelfSignedCert(t, "192.0.2.1")
				require.NoError(t, os.WriteFile(filepath.Join(c.Dir, "192.0.2.1.pem"), extra, 0o644))
				return fp
			},
			want: []string{"stage: refusing the bundle: 192.0.2.1.pem holds a certificate whose SHA-256 fingerprint FP(new) is not listed for 192.0.2.1.pem in LIST\n"},
		},
		"two servers' certificates swapped": {
			change: func(t *testing.T, c testkit.RegionServerCerts) string {
				a, err := os.ReadFile(filepath.Join(c.Dir, first))
				require.NoError(t, err)
				b, err := os.ReadFile(filepath.Join(c.Dir, second))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(c.Dir, first), b, 0o644))
				require.NoError(t, os.WriteFile(filepath.Join(c.Dir, second), a, 0o644))
				return ""
			},
			want: []string{"stage: refusing the bundle: " + first + " holds a certificate whose SHA-256 fingerprint FP(" + second + ") is not listed for " + first + " in LIST (it lists it for " + second + ")\n",
				"stage: refusing the bundle: " + second + " holds a certificate whose SHA-256 fingerprint FP(" + first + ") is not listed for " + second + " in LIST (it lists it for " + first + ")\n"},
		},
		"a listed certificate missing": {
			change: func(t *testing.T, c testkit.RegionServerCerts) string {
				_, fp := testkit.SelfSignedCert(t, "192.0.2.1")
				f, err := os.OpenFile(c.List, os.O_APPEND|os.O_WRONLY, 0)
				require.NoError(t, err)
				_, err = fmt.Fprintf(f, "%s  192.0.2.1.pem  regionServiceCertsAzure-9.9\n", fp)
				require.NoError(t, err)
				require.NoError(t, f.Close())
				return fp
			},
			want: []string{"stage: refusing the bundle: 192.0.2.1.pem is missing: LIST lists it, SHA-256 fingerprint FP(new) (regionServiceCertsAzure-9.9)\n"},
		},
		"a malformed line in the list": {
			change: func(t *testing.T, c testkit.RegionServerCerts) string {
				require.NoError(t, os.WriteFile(c.List, []byte("# comment\n\nAB:CD  "+first+"  from somewhere\n"), 0o644))
				return ""
			},
			want: []string{"stage: refusing the bundle: LIST:3 is not \"<fingerprint: 64 lower-case hex digits>  <file>.pem  <where it comes from>\": AB:CD  " + first + "  from somewhere\n"},
		},
		"the repository's list, which names none of the test's": {
			repositorys: true,
			want:        []string{"stage: refusing the bundle: " + first + " holds a certificate whose SHA-256 fingerprint FP(" + first + ") is not listed for " + first + " in manifests/marketplace/region-server-fingerprints.txt\n"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := regionServerCerts(t)
			newFP := ""
			if tc.change != nil {
				newFP = tc.change(t, c)
			}
			list := c.List
			if tc.repositorys {
				list = ""
			}
			out := t.TempDir()
			cmd := exec.Command("marketplace/stage.sh", out)
			cmd.Env = stageEnv(c.Dir, list)
			b, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "staged: %s", b)
			assert.Equal(t, 2, exit.ExitCode())
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "LIST", c.List)
				w = strings.ReplaceAll(w, "FP(new)", newFP)
				for file, fp := range c.Fingerprints {
					w = strings.ReplaceAll(w, "FP("+file+")", fp)
				}
				assert.Contains(t, string(b), w)
			}
			// The fix: the command that prints a fingerprint, and the list
			// to put it in.
			assert.Contains(t, string(b), "print its fingerprint with: "+fingerprintCommand+"; then add the line \"<fingerprint>  <file>  <where it comes from>\" to ")
			assert.NoDirExists(t, filepath.Join(out, "registration-engine"), "no chart left for cpa to package")
			t.Logf("proved: stage.sh refuses %s:\n%s", name, b)
		})
	}
}

// fingerprintCommand prints a certificate's fingerprint in the form the
// list holds; docs/releasing.md and stage.sh's refusal name it.
const fingerprintCommand = "openssl x509 -in <file> -outform DER | sha256sum"

// TestFingerprintCommandPrintsTheListedFingerprint: the command
// docs/releasing.md and stage.sh's refusal give a publisher, run as written
// on a certificate, prints the fingerprint stage.sh checks (the form the
// list holds), so a line made with it is accepted.
func TestFingerprintCommandPrintsTheListedFingerprint(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl on this machine: the command the docs give cannot be run")
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "releasing.md"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(doc), "\n"), fingerprintCommand, "docs/releasing.md gives the command on a line of its own")
	certs := testkit.NewRegionServerCerts(t, "40.121.202.140")
	file := filepath.Join(certs.Dir, "40.121.202.140.pem")
	out, err := exec.Command("bash", "-c", strings.ReplaceAll(fingerprintCommand, "<file>", "'"+file+"'")).Output()
	require.NoError(t, err)
	got, _, _ := strings.Cut(string(out), " ")
	assert.Equal(t, certs.Fingerprints["40.121.202.140.pem"], got)
	t.Logf("proved: %s printed %s, the fingerprint stage.sh checks for that file", fingerprintCommand, got)
}
