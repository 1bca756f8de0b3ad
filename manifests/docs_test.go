package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
