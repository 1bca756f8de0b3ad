package smt

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConfigValidate: the passes a person configured need at least one
// timeout and a pause before every pass after the first (or none at all,
// for the defaults), so that a run does not stop at phase 4 for a setting.
func TestConfigValidate(t *testing.T) {
	s := time.Second
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"the defaults":                    {cfg: Config{PassTimeouts: DefaultPassTimeouts, PassPauses: DefaultPassPauses}},
		"one pass, no pause":              {cfg: Config{PassTimeouts: []time.Duration{s}}},
		"three passes, no pause given":    {cfg: Config{PassTimeouts: []time.Duration{s, s, s}}},
		"no pass":                         {cfg: Config{}, want: "REGION_PASS_TIMEOUTS needs at least one duration"},
		"three passes, one pause for two": {cfg: Config{PassTimeouts: []time.Duration{s, s, s}, PassPauses: []time.Duration{s}}, want: "REGION_PASS_PAUSES has 1 pauses for 3 passes; give 2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
