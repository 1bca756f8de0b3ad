package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAddsTheReleaseProperties: the pairs land in metadata.properties after
// those cyclonedx-gomod wrote, nothing else of the SBOM is lost, and the
// same input gives the same bytes.
func TestAddsTheReleaseProperties(t *testing.T) {
	in := `{"bomFormat":"CycloneDX","specVersion":"1.6","metadata":{"component":{"name":"registration-engine"},` +
		`"properties":[{"name":"cdx:gomod:binary:hash:SHA-256","value":"ab"}]},"components":[{"name":"stdlib"}]}`
	args := []string{"registration-engine:release:binary", "copied from the image registration-engine:1.0.0-amd64 (/registration-engine)",
		"registration-engine:release:base-image", "local/static:bookworm"}
	var out, again bytes.Buffer
	require.NoError(t, run(args, strings.NewReader(in), &out))
	require.NoError(t, run(args, strings.NewReader(in), &again))
	assert.Equal(t, out.String(), again.String(), "reproducible")

	var doc struct {
		SpecVersion string `json:"specVersion"`
		Metadata    struct {
			Component  struct{ Name string } `json:"component"`
			Properties []property            `json:"properties"`
		} `json:"metadata"`
		Components []struct{ Name string } `json:"components"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc))
	assert.Equal(t, "1.6", doc.SpecVersion)
	assert.Equal(t, "registration-engine", doc.Metadata.Component.Name)
	assert.Equal(t, []property{
		{"cdx:gomod:binary:hash:SHA-256", "ab"},
		{"registration-engine:release:binary", "copied from the image registration-engine:1.0.0-amd64 (/registration-engine)"},
		{"registration-engine:release:base-image", "local/static:bookworm"},
	}, doc.Metadata.Properties)
	assert.Len(t, doc.Components, 1)
}

func TestRefusesWhatIsNotAnSBOM(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		in   string
		want string
	}{
		"odd arguments": {[]string{"a"}, `{}`, "usage"},
		"not JSON":      {[]string{"a", "b"}, `<xml/>`, "not a JSON object"},
		"not CycloneDX": {[]string{"a", "b"}, `{"bomFormat":"SPDX"}`, `bomFormat is not "CycloneDX"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := run(tc.args, strings.NewReader(tc.in), &bytes.Buffer{})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
