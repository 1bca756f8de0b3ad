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
