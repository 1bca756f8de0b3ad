package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestList: -run and -skip select top-level tests as go test does, a
// proved: line counts when a selected test reaches its function by name
// (a method value, a helper), local variables and unreached functions do
// not, and build tags decide the files.
func TestList(t *testing.T) {
	const dir = "testdata/pkg"
	tests := map[string]struct {
		run, skip, tags string
		want            []string
	}{
		"all": {want: []string{
			"TestFast\tproved: by method value", "TestFast\tproved: through a helper %s", "TestLong\tproved: long %d",
		}},
		"skip the long one": {skip: "^(TestLong)$", want: []string{
			"TestFast\tproved: by method value", "TestFast\tproved: through a helper %s",
		}},
		"only the long one":  {run: "^(TestLong)$", want: []string{"TestLong\tproved: long %d"}},
		"with the build tag": {run: "Tagged", tags: "e2e", want: []string{"TestTagged\tproved: only with -tags e2e"}},
		"without it":         {run: "Tagged"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			f, err := os.Create(out)
			require.NoError(t, err)
			require.NoError(t, list(f, "L", tc.run, tc.skip, tc.tags, false, []string{dir}))
			require.NoError(t, f.Close())
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if l == "" {
					continue
				}
				require.True(t, strings.HasPrefix(l, "L\t"+dir+"\t"), l)
				got = append(got, strings.TrimPrefix(l, "L\t"+dir+"\t"))
			}
			assert.Equal(t, tc.want, got)
		})
	}
}
