package job

import (
	"strconv"
	"strings"
	"time"
)

// ScheduledWindow is how long after its scheduled minute a run still counts
// as scheduled and takes the startup sleep. It covers the CronJob
// controller's delay and pod start-up; a retry of a failed pod that starts
// later does not sleep a second time, which keeps the Job inside its
// activeDeadlineSeconds (see
// manifests/base/cattle-scc-system/cronjob.yaml).
const ScheduledWindow = 15 * time.Minute

// scheduledSkew tolerates a node clock that is behind the controller's.
const scheduledSkew = 2 * time.Minute

// ScheduledRun reports whether this run was started by the CronJob on its
// schedule, and so must take the random startup sleep that keeps many
// clusters from calling the region servers in the same minute. Every other
// run starts at once: a manual Job, a run from a workstation, the demo.
//
// The signal is the Job's name, which the pod reads from its label
// batch.kubernetes.io/job-name through the downward API (JOB_NAME). The
// CronJob controller names its Jobs <cronjob>-<scheduled time in minutes
// since the epoch>, so a scheduled run's name ends in a number that, times 60
// seconds, is within ScheduledWindow of now. The manual-run marker,
// annotation cronjob.kubernetes.io/instantiate: manual, is on the Job and
// never reaches the pod, and `kubectl create job --from=cronjob/…` requires
// a name of the user's choosing, which is practically never such a number.
//
// cronJobName, when set, must be the name's prefix; empty accepts any prefix
// (for a CronJob renamed by a kustomize namePrefix). An empty jobName (not
// in a Job) is never scheduled.
func ScheduledRun(jobName, cronJobName string, now time.Time) bool {
	i := strings.LastIndexByte(jobName, '-')
	if i <= 0 {
		return false
	}
	prefix, digits := jobName[:i], jobName[i+1:]
	if cronJobName != "" && prefix != cronJobName {
		return false
	}
	if len(digits) == 0 || len(digits) > 12 || strings.TrimLeft(digits, "0123456789") != "" {
		return false
	}
	minutes, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return false
	}
	since := now.Sub(time.Unix(minutes*60, 0))
	return since >= -scheduledSkew && since <= ScheduledWindow
}
