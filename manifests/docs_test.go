package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/util/jsonpath"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/internal/testkit"
)

// docs/install.md's value tables name every top-level value of the chart's
// values.yaml (a row may name several, or a value's fields), and no value
// the chart does not have.
func TestInstallDocNamesEveryChartValue(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(data, &values))
	doc, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	require.NoError(t, err)
	documented := testkit.TableNames(doc, regexp.MustCompile("`([a-z][A-Za-z0-9]*)(?:[.{][^`]*)?`"), "| `")
	for k := range values {
		assert.True(t, documented[k], "value %s has no row in docs/install.md", k)
	}
	for d := range documented {
		if _, ok := values[d]; !ok {
			assert.Contains(t, []string{"global"}, d, "docs/install.md names value %s, which values.yaml does not have", d)
		}
	}
}

// An upgrade the docs or the NOTES suggest for this chart keeps the new
// chart's defaults (docs/upgrade.md, "Values from an older release"):
// --reset-then-reuse-values, never --reuse-values, which drops the values
// a newer chart added and fails (architectures is empty).
func TestDocsUpgradeKeepsNewDefaults(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "README.md"), filepath.Join(chartDir, "templates", "NOTES.txt"))
	ours := regexp.MustCompile(`helm upgrade (registration-engine|<release>|\{\{ \.Release\.Name \}\}) [^\n]*`)
	found := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, cmd := range ours.FindAllString(string(data), -1) {
			found++
			assert.NotContains(t, cmd, "--reuse-values", "%s: %s", f, cmd)
		}
	}
	require.NotZero(t, found, "the docs show an upgrade command")
}

// docs/troubleshoot.md's status command in the cluster is one to paste:
// it reads the engine's image from the CronJob the chart renders (its
// jsonpath finds the image there), and its --overrides, with the image put
// in by the shell, is JSON naming that image.
func TestTroubleshootStatusCommandReadsTheImage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "troubleshoot.md"))
	require.NoError(t, err)
	assert.NotContains(t, string(doc), "<the engine's image>", "a placeholder where a command must run")
	m := regexp.MustCompile(`IMAGE=\$\(kubectl -n cattle-scc-system get cronjob registration-engine -o jsonpath='([^']+)'\)`).FindSubmatch(doc)
	require.NotNil(t, m, "the command reads the image from the CronJob")

	objs := splitObjects(t, helmTemplate(t, chartDir, minimal))
	cj, c := chartCronJob(t, objs)
	jp := jsonpath.New("image")
	require.NoError(t, jp.Parse(string(m[1])))
	var image bytes.Buffer
	require.NoError(t, jp.Execute(&image, objs["CronJob/"+chartNamespace+"/"+cj.Name].obj))
	assert.Equal(t, c.Image, image.String())

	o := regexp.MustCompile(`--overrides='(.+)'\n`).FindSubmatch(doc)
	require.NotNil(t, o)
	overrides := strings.ReplaceAll(string(o[1]), `'"$IMAGE"'`, image.String())
	var pod struct {
		Spec struct {
			Containers []struct {
				Image string   `json:"image"`
				Args  []string `json:"args"`
			} `json:"containers"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal([]byte(overrides), &pod), "the overrides the shell passes")
	require.Len(t, pod.Spec.Containers, 1)
	assert.Equal(t, c.Image, pod.Spec.Containers[0].Image)
	assert.Equal(t, []string{"status"}, pod.Spec.Containers[0].Args)
}

// docs/releasing.md says each check of a release, with the words the
// scripts refuse with (the tests of the scripts hold what they print) and
// the fix, so that a publisher reading a refusal finds it there.
func TestReleasingDocSaysEachCheck(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		return string(b)
	}
	doc, release, stage := read(filepath.Join("..", "docs", "releasing.md")), read(filepath.Join("..", "hack", "release.sh")), read(filepath.Join("marketplace", "stage.sh"))
	tests := map[string]struct {
		script   string
		inDoc    string // the refusal as the doc quotes it
		inScript string // the same words in the script
		fixInDoc []string
	}{
		"VERSION":   {release, "`release: VERSION <v> is not #.#.#`", `"release: VERSION $version is not #.#.#`, nil},
		"CHANGELOG": {release, "`release: CHANGELOG.md has no section for <v>`", `"release: CHANGELOG.md has no section for $version`, nil},
		"bases pinned": {release, "`release: the image's bases are not pinned by digest:`", `"release: the image's bases are not pinned by digest:"`,
			[]string{"`<name>@sha256:<digest>`", "`RELEASE_UNPINNED=1`"}},
		"the engine's digest": {release, "`release: ENGINE_DIGEST=<digest> is not the digest of the image this build made, <image> (image ID <id>), which was\n  pushed as:`",
			`"release: ENGINE_DIGEST=$ENGINE_DIGEST is not the digest of the image this build made, $tag (image ID $id), which was pushed as:"`,
			[]string{"`make image-push IMAGE=<registry>/rancher/registration-engine:<version>`", "docker image inspect -f '{{join .RepoDigests \" \"}}'"}},
		"the engine's digest, never pushed": {release, "that image has no registry digest (it was not pushed, or this build made a new one)`",
			"that image has no registry digest (it was not pushed, or this build made a new one)\"", nil},
		"the engine's digest, no amd64": {release, "`release: ENGINE_DIGEST names the bundle's linux/amd64 image, but RELEASE_ARCHS=\"…\" builds none: add amd64`",
			`"release: ENGINE_DIGEST names the bundle's linux/amd64 image, but RELEASE_ARCHS=\"$archs\" builds none: add amd64"`, nil},
		"the engine's digest, not compared": {release, "`release: ENGINE_DIGEST=sha256:… not compared with an image: RELEASE_IMAGE=0 built none`",
			`"release: ENGINE_DIGEST=$ENGINE_DIGEST not compared with an image: RELEASE_IMAGE=0 built none"`, nil},
		"a certificate per region server": {stage, "`stage: refusing the bundle: no certificate <server>.pem for region server(s)`",
			`"no certificate <server>.pem for region server(s) ${missing[*]}`, []string{"`REGION_SERVER_CERTS`"}},
		"a certificate not listed": {stage, "`stage: refusing the bundle: <file> holds a certificate whose SHA-256 fingerprint <fingerprint> is not listed for\n  <file> in <list>`",
			`"$file holds a certificate whose SHA-256 fingerprint $fp is not listed for $file in $list_name$other"`,
			[]string{"```sh\n" + fingerprintCommand + "\n```", "`manifests/marketplace/region-server-fingerprints.txt`", "`rpm -K`"}},
		"a listed certificate missing": {stage, "`stage: refusing the bundle: <file> is missing: <list> lists it, …`",
			`"$file is missing: $list_name lists it, SHA-256 fingerprint $fp`, nil},
		"a malformed line": {stage, "`stage: refusing the bundle: <list>:<line> is not \"<fingerprint: 64 lower-case hex digits>  <file>.pem  <where it\n  comes from>\"`",
			`"$list_name:$n is not \"<fingerprint: 64 lower-case hex digits>  <file>.pem  <where it comes from>\": $line"`, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Contains(t, tc.script, tc.inScript, "the script no longer says this: change docs/releasing.md and this test with it")
			assert.Contains(t, doc, tc.inDoc, "docs/releasing.md does not quote the refusal")
			for _, f := range tc.fixInDoc {
				assert.Contains(t, doc, f, "docs/releasing.md does not give the fix")
			}
		})
	}
	// The list the doc names is the one stage.sh reads.
	assert.Contains(t, stage, `list=${REGION_SERVER_FINGERPRINTS:-$here/region-server-fingerprints.txt}`)
	assert.FileExists(t, filepath.Join("marketplace", "region-server-fingerprints.txt"))
}
