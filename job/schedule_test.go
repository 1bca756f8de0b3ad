package job

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestScheduledRun(t *testing.T) {
	now := time.Date(2026, 11, 30, 18, 0, 40, 0, time.UTC)
	minute := func(t time.Time) string { return strconv.FormatInt(t.Unix()/60, 10) }
	scheduledNow := "registration-engine-" + minute(now) // what the controller names the 18:00 Job

	tests := map[string]struct {
		job, cronJob string
		scheduled    bool
	}{
		"the CronJob's Job for this minute":             {job: scheduledNow, cronJob: "registration-engine", scheduled: true},
		"pod started 14 minutes late":                   {job: "registration-engine-" + minute(now.Add(-14*time.Minute)), cronJob: "registration-engine", scheduled: true},
		"node clock a minute behind the controller":     {job: "registration-engine-" + minute(now.Add(time.Minute)), cronJob: "registration-engine", scheduled: true},
		"any CronJob name when none is configured":      {job: "payg-registration-engine-" + minute(now), scheduled: true},
		"manual: kubectl create job --from=cronjob/… x": {job: "manual-1", cronJob: "registration-engine"},
		"manual with a date-like name":                  {job: "registration-engine-20261130", cronJob: "registration-engine"},
		"retry pod of a Job scheduled an hour ago":      {job: "registration-engine-" + minute(now.Add(-time.Hour)), cronJob: "registration-engine"},
		"name from the future":                          {job: "registration-engine-" + minute(now.Add(10*time.Minute)), cronJob: "registration-engine"},
		"another CronJob's Job":                         {job: "other-" + minute(now), cronJob: "registration-engine"},
		"not in a Job (workstation, demo)":              {job: "", cronJob: "registration-engine"},
		"no digits":                                     {job: "registration-engine-", cronJob: "registration-engine"},
		"digits with a sign":                            {job: "registration-engine-+" + minute(now)[1:], cronJob: "registration-engine"},
		"absurdly long number":                          {job: "registration-engine-99999999999999999999", cronJob: "registration-engine"},
		"just digits, no CronJob prefix":                {job: minute(now)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.scheduled, ScheduledRun(tc.job, tc.cronJob, now))
		})
	}
}
