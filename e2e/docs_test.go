package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReliabilityMatrixNamesRealTests keeps docs/RELIABILITY.md honest:
// every `package` `TestName/subtest` it cites must exist in that package's
// test files (the subtest as a literal name), so a renamed or deleted test
// cannot leave a row claiming a proof that no longer runs.
func TestReliabilityMatrixNamesRealTests(t *testing.T) {
	doc, err := os.ReadFile("../docs/RELIABILITY.md")
	require.NoError(t, err)
	refs := regexp.MustCompile("`([a-z0-9/]+)` `(Test[A-Za-z0-9_]+)(?:/([^`]+))?`").FindAllStringSubmatch(string(doc), -1)
	require.Greater(t, len(refs), 50, "the matrix cites its tests")

	sources := map[string]string{}
	for _, ref := range refs {
		pkg, test, sub := ref[1], ref[2], ref[3]
		src, ok := sources[pkg]
		if !ok {
			files, err := filepath.Glob(filepath.Join("..", pkg, "*_test.go"))
			require.NoError(t, err)
			var b strings.Builder
			for _, f := range files {
				data, err := os.ReadFile(f)
				require.NoError(t, err)
				b.Write(data)
			}
			src = b.String()
			sources[pkg] = src
		}
		if !assert.Contains(t, src, "func "+test+"(", "docs/RELIABILITY.md cites %s %s, which does not exist", pkg, test) {
			continue
		}
		if sub != "" {
			assert.Contains(t, src, `"`+sub+`"`, "docs/RELIABILITY.md cites subtest %s/%s in %s, which does not exist", test, sub, pkg)
		}
	}
}
