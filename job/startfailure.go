package job

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/kube"
	"github.com/rancher/registration-engine/job/operator"
	"github.com/rancher/registration-engine/job/redact"
)

// PhaseStart is the failed phase of a run that never started: its
// configuration did not load, or what it names (a CA file, the API server's
// credentials) could not be used.
const PhaseStart = "load-config"

// ReportStartFailure is what a run that cannot start leaves behind, as a
// run that started would: its summary as the last log line ("run
// finished", outcome failed, failedPhase load-config, the exit code and
// every problem) in JSON, or with LOG_FORMAT text or for a usage error
// (ErrUsage) each problem on a line of its own after "registration-engine: "; and, in a Job's pod
// (JOB_NAME and JOB_UID set), a Warning Event on that Job, so that
// `kubectl describe job` and `registration-engine status` name the
// setting to fix. The registration code, whichever variable holds it, is
// redacted. A failure to record the Event is logged, never returned: the
// run's error is the one that counts. log, when set, is the run's logger;
// otherwise one is made from LOG_FORMAT.
func ReportStartFailure(ctx context.Context, runErr error, log *slog.Logger, getenv func(string) string, stderr io.Writer) {
	secrets := redact.New()
	for _, v := range regCodeVars {
		secrets.Add(getenv(v))
	}
	code := ExitCode(runErr)
	text := strings.EqualFold(strings.TrimSpace(getenv("LOG_FORMAT")), "text")
	if log == nil {
		var h slog.Handler = slog.NewJSONHandler(stderr, nil)
		if text {
			h = slog.NewTextHandler(stderr, nil)
		}
		log = slog.New(redact.NewHandler(h, secrets))
	}
	if text || errors.Is(runErr, ErrUsage) {
		// For a person at a terminal (a usage error is one's: a mistyped
		// flag is no run to summarise): each problem on a line of its own.
		defer fmt.Fprintf(stderr, "registration-engine: %s\n", secrets.String(runErr.Error()))
	} else {
		defer log.Error("run finished", slog.String("outcome", OutcomeFailed), slog.String("failedPhase", PhaseStart),
			slog.Int("exitCode", code), slog.String("error", runErr.Error()))
	}

	jobName, jobUID := getenv("JOB_NAME"), getenv("JOB_UID")
	if jobName == "" || jobUID == "" {
		return // not a Job's pod: nothing to record an Event on
	}
	rc, err := kube.RESTConfig(envClientOptions(getenv, getenv("KUBECONFIG"), ""), log)
	var clients *kube.Clients
	if err == nil {
		clients, err = kube.NewClients(rc)
	}
	if err != nil {
		log.Warn("could not record the failure as an Event on the Job", slog.String("error", err.Error()))
		return
	}
	events := &kube.JobEvents{
		Events:    clients.Events,
		Namespace: cmp.Or(getenv("REGISTRATION_SECRET_NAMESPACE"), getenv("POD_NAMESPACE"), operator.Namespace),
		JobName:   jobName,
		JobUID:    jobUID,
		Instance:  getenv("POD_NAME"),
		Redact:    secrets,
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	e := failedEvent(PhaseStart, runErr)
	if err := events.Record(ectx, e); err != nil {
		log.Warn("could not record the failure as an Event on the Job", slog.String("reason", e.Reason), slog.String("error", err.Error()))
	}
}
