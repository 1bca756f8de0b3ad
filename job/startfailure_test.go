package job

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
)

// A run that cannot start ends, like any run, with its JSON summary (the
// phase, exit 2, every problem); with LOG_FORMAT text a person reads each
// problem on a line of its own. The registration code never shows,
// whichever variable holds it. Outside a Job's pod nothing is sent.
func TestReportStartFailure(t *testing.T) {
	err := failure.Permanent(errors.Join(errors.New(`RUN_DEADLINE="-5m": want a duration`), errors.New(`REG_CODE "SECRET-CODE-1" is a placeholder`)))
	for _, format := range []string{"", "json", "text"} {
		t.Run("LOG_FORMAT="+format, func(t *testing.T) {
			env := map[string]string{"LOG_FORMAT": format, "REG_CODE": "SECRET-CODE-1"}
			var stderr bytes.Buffer
			ReportStartFailure(context.Background(), err, nil, func(k string) string { return env[k] }, &stderr)
			out := stderr.String()
			assert.NotContains(t, out, "SECRET-CODE-1")
			if format == "text" {
				assert.Equal(t, "registration-engine: RUN_DEADLINE=\"-5m\": want a duration\nREG_CODE \"REDACTED\" is a placeholder\n", out)
				return
			}
			s := testkit.Summary(t, out)
			assert.Equal(t, "run finished", s["msg"])
			assert.Equal(t, OutcomeFailed, s["outcome"])
			assert.Equal(t, PhaseStart, s["failedPhase"])
			assert.EqualValues(t, ExitPermanent, s["exitCode"])
			require.IsType(t, "", s["error"])
			assert.True(t, strings.HasPrefix(s["error"].(string), `RUN_DEADLINE="-5m"`), s["error"])
		})
	}
}
