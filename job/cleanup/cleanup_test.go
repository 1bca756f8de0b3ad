package cleanup

import (
	"bytes"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestClusterRanges: the uninstall hook reads CLUSTER_ADDRESS_RANGES as the
// run does, so that it counts as the engine's the entries the admission
// policy lets it remove; a value a run would refuse does not stop the
// uninstall: the defaults (nil), and a warning that names the value.
func TestClusterRanges(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	assert.Nil(t, clusterRanges("", log), "unset: the defaults")
	assert.Empty(t, logs.String())

	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("203.0.113.0/24")},
		clusterRanges("10.0.0.0/8, 203.0.113.7/24,10.0.0.0/8", log), "as the run reads it: masked, duplicates dropped")
	assert.Empty(t, logs.String())

	assert.Nil(t, clusterRanges("10.0.0.0/8,203.0.113.7", log), "unreadable: the defaults")
	assert.Contains(t, logs.String(), `CLUSTER_ADDRESS_RANGES is unreadable; using the defaults`)
	assert.Contains(t, logs.String(), `203.0.113.7`)
}
