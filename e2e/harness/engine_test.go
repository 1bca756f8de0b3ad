package harness_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/e2e/harness"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job"
)

// TestRunEngine: the engine gets only the environment it is given. A
// setting in the test's own environment (JOB_NAME, which the fake cloud
// does not set and the engine logs) never reaches it; with the fake cloud's
// environment it registers, and every endpoint that environment names is
// on loopback.
func TestRunEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res := harness.RunEngine(t, ctx, nil, "--version")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, "registration-engine "+job.Version+"\n", res.Stdout)

	const leaked = "job-name-of-the-test-process"
	t.Setenv("JOB_NAME", leaked)
	c := harness.StartCloud(t)
	require.NotContains(t, c.Vars(), "JOB_NAME", "the check needs a setting the fake cloud leaves unset")
	res = harness.RunEngine(t, ctx, append(c.Env, "REGISTRATION_CODE=E2E-HARNESS-CODE"), "--dry-run")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, job.OutcomeRegistered, testkit.Summary(t, res.Stderr)["outcome"])
	var started map[string]any
	for _, l := range testkit.LogLines(t, res.Stderr) {
		if l["msg"] == "registration-engine starting" {
			started = l
		}
	}
	require.NotNil(t, started, "the engine logs its configuration at start:\n%s", res.Stderr)
	cfg, _ := started["config"].(map[string]any)
	assert.Equal(t, "", cfg["jobName"], "the test's JOB_NAME reached the engine")
	assert.NotContains(t, res.Stderr, leaked)

	for k, v := range c.Vars() {
		if strings.Contains(v, "://") {
			assert.Regexp(t, `^https?://(127\.0\.0\.1|\[::1\]):`, v, "%s: the fake cloud listens on loopback only", k)
		}
	}
}
