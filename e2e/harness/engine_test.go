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

// TestRunEngine: the engine runs with only the environment it is given, so
// a run without the fake cloud's finds no cloud (nothing of the test's own
// environment, no real endpoint), and one with it registers.
func TestRunEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	res := harness.RunEngine(t, ctx, nil, "--version")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, "registration-engine "+job.Version+"\n", res.Stdout)

	t.Setenv("AZURE_IMDS_ENDPOINT", "http://192.0.2.1") // must not reach the engine
	res = harness.RunEngine(t, ctx, []string{"REGISTRATION_CODE=X"}, "--dry-run")
	require.Equal(t, job.ExitPermanent, res.Code, res.String())
	assert.NotContains(t, res.Stderr, "192.0.2.1", "the test's environment leaked into the engine's")
	assert.Contains(t, res.String(), "exit 2 after ")

	c := harness.StartCloud(t)
	res = harness.RunEngine(t, ctx, append(c.Env, "REGISTRATION_CODE=X"), "--dry-run")
	require.Equal(t, job.ExitOK, res.Code, res.String())
	assert.Equal(t, job.OutcomeRegistered, testkit.Summary(t, res.Stderr)["outcome"])
	for k, v := range c.Vars() {
		if strings.Contains(v, "://") {
			assert.Regexp(t, `^https?://(127\.0\.0\.1|\[::1\]):`, v, "%s: the fake cloud listens on loopback only", k)
		}
	}
}
