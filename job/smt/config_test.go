package smt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
)

// TestConfigValidate: the passes a person configured need at least one
// timeout and a pause before every pass after the first (or none at all,
// for the defaults), so that a run does not stop at phase 4 for a setting.
func TestConfigValidate(t *testing.T) {
	s := time.Second
	tests := map[string]struct {
		cfg Config
		// err: refused; what it says is in the golden file.
		err bool
	}{
		"the defaults":                    {cfg: Config{PassTimeouts: DefaultPassTimeouts, PassPauses: DefaultPassPauses}},
		"one pass, no pause":              {cfg: Config{PassTimeouts: []time.Duration{s}}},
		"three passes, no pause given":    {cfg: Config{PassTimeouts: []time.Duration{s, s, s}}},
		"no pass":                         {cfg: Config{}, err: true},
		"three passes, one pause for two": {cfg: Config{PassTimeouts: []time.Duration{s, s, s}, PassPauses: []time.Duration{s}}, err: true},
	}
	// What each refusal says, the setting and what to give among it: the
	// golden file.
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if !tc.err {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			msgs.Add(name, err)
		})
	}
}
