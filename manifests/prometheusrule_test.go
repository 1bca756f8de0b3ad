package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/rancher/registration-engine/internal/testkit"
)

// promtool is PROMTOOL_BIN (make test sets it to the one
// e2e/scripts/promtool-bin.sh extracts from Debian's prometheus package),
// else promtool on PATH; see testkit.Tool.
func promtool(t *testing.T) string {
	t.Helper()
	return testkit.Tool(t, "promtool", "PROMTOOL_BIN", os.Getenv("PROMTOOL_BIN"), "e2e/scripts/promtool-bin.sh")
}

// The chart's PrometheusRule, off by default, evaluated by Prometheus's own
// rule engine (promtool test rules) on kube-state-metrics' series as they
// look for the engine's Jobs: RegistrationEngineRunFailed fires when the
// newest finished run failed (a release run, a scheduled one) and clears
// when a newer run completes; the uninstall hook's Job never counts;
// RegistrationEngineNoSuccess fires once neither the CronJob nor any Job
// has succeeded for noSuccessHours.
func TestChartPrometheusRuleAlerts(t *testing.T) {
	bin := promtool(t)
	assert.NotContains(t, string(helmTemplate(t, chartDir, minimal)), "PrometheusRule", "off by default")

	// Not an API type of client-go's: decoded as plain YAML.
	var rule struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name, Namespace string
			Labels          map[string]string
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}
	for _, doc := range strings.Split(string(helmTemplate(t, chartDir, minimal, "prometheusRule.enabled=true", "prometheusRule.labels.release=monitoring")), "\n---\n") {
		if strings.Contains(doc, "\nkind: PrometheusRule\n") {
			require.NoError(t, yaml.Unmarshal([]byte(doc), &rule))
		}
	}
	require.Equal(t, "PrometheusRule", rule.Kind, "the PrometheusRule is rendered")
	assert.Equal(t, chartNamespace, rule.Metadata.Namespace)
	assert.Equal(t, "monitoring", rule.Metadata.Labels["release"], "labels for a ruleSelector")
	assert.Equal(t, "registration-engine", rule.Metadata.Labels["app.kubernetes.io/name"], "and the chart's own")
	spec, err := yaml.Marshal(rule.Spec)
	require.NoError(t, err)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(alertTests), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := testkit.Command(ctx, bin, "check", "rules", filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err, "%s", out)
	out, err = testkit.Command(ctx, bin, "test", "rules", filepath.Join(dir, "test.yaml"))
	require.NoError(t, err, "promtool test rules:\n%s", out)
	t.Logf("proved: the chart's PrometheusRule passes promtool check rules and its 14 alert checks in 10 scenarios (promtool test rules): RegistrationEngineRunFailed fires 10 min after the newest run failed, not when a newer run completed, not for the cleanup hook's Job; RegistrationEngineNoSuccess fires after 40 h without a success, not while a recent run completed; RegistrationEngineNotRegistered fires 2 h after the install of a cluster whose runs wait for a registration code (no Secret scc-registration), not once the Secret exists")
}

// alertTests are promtool's unit tests of the rules (rules.yaml beside
// them), on series named as kube-state-metrics names them, one sample a
// minute (a sparser series goes stale between samples). Times are seconds
// from the start, as promtool's time() counts.
const alertTests = `rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - name: a failed release run, none succeeded yet
    interval: 1m
    input_series:
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e"}'
        values: '60x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e", condition="true"}'
        values: '1x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e", condition="false"}'
        values: '0x30'
    alert_rule_test:
      - eval_time: 5m
        alertname: RegistrationEngineRunFailed
        exp_alerts: []
      - eval_time: 11m
        alertname: RegistrationEngineRunFailed
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The registration engine's last run in cattle-scc-system failed.
              description: 'The newest Job of registration-engine in cattle-scc-system failed and no run has registered since. Its Event and the engine''s verdict name the cause and the fix: registration-engine status, or kubectl -n cattle-scc-system describe job on the newest registration-engine- Job. A transient cause clears at the next run.'
  - name: a scheduled run after the failure registered
    interval: 1m
    input_series:
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e"}'
        values: '60x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e", condition="true"}'
        values: '1x30'
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-29412345"}'
        values: '120x30'
      - series: 'kube_job_complete{namespace="cattle-scc-system", job_name="registration-engine-29412345", condition="true"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: RegistrationEngineRunFailed
        exp_alerts: []
  - name: a scheduled run failed after an older success
    interval: 1m
    input_series:
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-29412345"}'
        values: '60x30'
      - series: 'kube_job_complete{namespace="cattle-scc-system", job_name="registration-engine-29412345", condition="true"}'
        values: '1x30'
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-29413425"}'
        values: '120x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-29413425", condition="true"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: RegistrationEngineRunFailed
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The registration engine's last run in cattle-scc-system failed.
              description: 'The newest Job of registration-engine in cattle-scc-system failed and no run has registered since. Its Event and the engine''s verdict name the cause and the fix: registration-engine status, or kubectl -n cattle-scc-system describe job on the newest registration-engine- Job. A transient cause clears at the next run.'
  - name: the uninstall hook's Job and another namespace do not count
    interval: 1m
    input_series:
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-cleanup"}'
        values: '60x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-cleanup", condition="true"}'
        values: '1x30'
      - series: 'kube_job_created{namespace="default", job_name="registration-engine-1"}'
        values: '60x30'
      - series: 'kube_job_failed{namespace="default", job_name="registration-engine-1", condition="true"}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: RegistrationEngineRunFailed
        exp_alerts: []
  - name: the retry CronJob's looks complete every 10 minutes and clear nothing
    interval: 1m
    input_series:
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e"}'
        values: '60x30'
      - series: 'kube_job_failed{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e", condition="true"}'
        values: '1x30'
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-retry-29412350"}'
        values: '600x30'
      - series: 'kube_job_complete{namespace="cattle-scc-system", job_name="registration-engine-retry-29412350", condition="true"}'
        values: '_x10 1x20'
    alert_rule_test:
      - eval_time: 25m
        alertname: RegistrationEngineRunFailed
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The registration engine's last run in cattle-scc-system failed.
              description: 'The newest Job of registration-engine in cattle-scc-system failed and no run has registered since. Its Event and the engine''s verdict name the cause and the fix: registration-engine status, or kubectl -n cattle-scc-system describe job on the newest registration-engine- Job. A transient cause clears at the next run.'
  - name: no success for 40 hours
    interval: 1m
    input_series:
      - series: 'kube_cronjob_status_last_successful_time{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '0x2500'
    alert_rule_test:
      - eval_time: 40h
        alertname: RegistrationEngineNoSuccess
        exp_alerts: []
      - eval_time: 40h20m
        alertname: RegistrationEngineNoSuccess
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The registration engine in cattle-scc-system has not succeeded for 40 hours.
              description: 'No run of registration-engine in cattle-scc-system has succeeded for 40 hours: the cluster''s registration is not being kept current. See registration-engine status and the newest Job''s Event.'
  - name: retries that never succeed still leave no success for 40 hours
    interval: 1m
    input_series:
      - series: 'kube_cronjob_status_last_successful_time{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '0x2500'
      - series: 'kube_cronjob_status_last_successful_time{namespace="cattle-scc-system", cronjob="registration-engine-retry"}'
        values: '144000x2500'
      - series: 'kube_job_status_completion_time{namespace="cattle-scc-system", job_name="registration-engine-retry-29414000"}'
        values: '144000x2500'
    alert_rule_test:
      - eval_time: 40h20m
        alertname: RegistrationEngineNoSuccess
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The registration engine in cattle-scc-system has not succeeded for 40 hours.
              description: 'No run of registration-engine in cattle-scc-system has succeeded for 40 hours: the cluster''s registration is not being kept current. See registration-engine status and the newest Job''s Event.'
  - name: the release's run completed lately, the CronJob's last success is old
    interval: 1m
    input_series:
      - series: 'kube_cronjob_status_last_successful_time{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '0x2500'
      - series: 'kube_job_status_completion_time{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e"}'
        values: '126000x2500'
    alert_rule_test:
      - eval_time: 40h20m
        alertname: RegistrationEngineNoSuccess
        exp_alerts: []
  - name: installed without a registration code, the runs succeed and wait
    interval: 1m
    input_series:
      - series: 'kube_cronjob_created{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '0x200'
      - series: 'kube_cronjob_status_last_successful_time{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '60x200'
      - series: 'kube_job_created{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e"}'
        values: '60x200'
      - series: 'kube_job_complete{namespace="cattle-scc-system", job_name="registration-engine-run-0a1b2c3d4e", condition="true"}'
        values: '1x200'
      - series: 'kube_secret_info{namespace="cattle-scc-system", secret="registration-code"}'
        values: '1x200'
      - series: 'kube_secret_info{namespace="cattle-system", secret="scc-registration"}'
        values: '1x200'
    alert_rule_test:
      - eval_time: 2h5m
        alertname: RegistrationEngineNotRegistered
        exp_alerts: []
      - eval_time: 2h11m
        alertname: RegistrationEngineNotRegistered
        exp_alerts:
          - exp_labels: {namespace: cattle-scc-system, severity: warning}
            exp_annotations:
              summary: The cluster in cattle-scc-system has not been registered 2 hours after the install.
              description: 'registration-engine was installed in cattle-scc-system 2 hours ago and there is still no Secret scc-registration. Most often the registration code is missing (Event RegistrationCodeMissing): set it as docs/install.md, "The registration code", shows; otherwise the runs fail (RegistrationEngineRunFailed). See registration-engine status.'
      - eval_time: 2h11m
        alertname: RegistrationEngineRunFailed
        exp_alerts: []
  - name: registered after half an hour of Azure's propagation
    interval: 1m
    input_series:
      - series: 'kube_cronjob_created{namespace="cattle-scc-system", cronjob="registration-engine"}'
        values: '0x200'
      - series: 'kube_secret_info{namespace="cattle-scc-system", secret="scc-registration"}'
        values: '_x30 1x170'
    alert_rule_test:
      - eval_time: 3h
        alertname: RegistrationEngineNotRegistered
        exp_alerts: []
`
