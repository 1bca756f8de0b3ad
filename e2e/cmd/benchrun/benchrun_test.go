package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The report is only as right as the parsing of what it reports: these
// tests pin the readers of go test output and of the engine's run
// summary, and the judging of the targets.

// TestParseGoBench reads the recorded `go test -bench` output the page
// golden renders (recordedGoBench).
func TestParseGoBench(t *testing.T) {
	list := parseGoBench(recordedGoBench)
	require.Len(t, list, 3)

	detect := find(list, "", "BenchmarkDetectNothingListening")
	require.NotNil(t, detect)
	assert.Equal(t, "github.com/rancher/registration-engine/providers", detect.pkg)
	ns, ok := detect.median("ns/op")
	assert.True(t, ok)
	assert.InDelta(t, 2002117283.5, ns, 0.5, "median of two repetitions")
	assert.Equal(t, 2, detect.Reps())

	parse := find(list, "", "BenchmarkParseRegionData")
	require.NotNil(t, parse)
	assert.Equal(t, "github.com/rancher/registration-engine/job/smt", parse.pkg, "a later pkg: line names the package of what follows")
	mbs, ok := parse.median("MB/s")
	assert.True(t, ok)
	assert.InDelta(t, 56.2, mbs, 1e-9)
	_, ok = parse.median("seconds/op")
	assert.False(t, ok, "a unit the benchmark does not report")
}

func TestSummarize(t *testing.T) {
	tests := map[string]struct {
		in   []time.Duration
		want stats[time.Duration]
	}{
		"odd count":  {[]time.Duration{5, 1, 3}, stats[time.Duration]{Median: 3, Min: 1, Max: 5}},
		"even count": {[]time.Duration{4, 1, 2, 3}, stats[time.Duration]{Median: 2, Min: 1, Max: 4}},
		"empty":      {nil, stats[time.Duration]{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, summarize(tc.in))
		})
	}
}

func TestJudge(t *testing.T) {
	format := func(f float64) string { return fmtDur(time.Duration(f)) }
	assert.Equal(t, "**pass** (90.0 ms to spare)", judge(float64(2010*time.Millisecond), float64(targetOffCloud), format))
	assert.Equal(t, "**miss** by 100.0 ms (20%)", judge(float64(600*time.Millisecond), float64(targetHealthy), format))
}

// TestBlackHoleTarget: the IPv6 black hole row compares the two scenarios
// measured side by side, as a difference against the target and a ratio.
func TestBlackHoleTarget(t *testing.T) {
	runs := func(d time.Duration) []sample { return []sample{{Wall: d}, {Wall: d}, {Wall: d}} }
	tests := map[string]struct {
		blackHole  time.Duration
		wantResult string
		wantIn     string
	}{
		"two head starts slower: pass": {blackHole: 800 * time.Millisecond, wantResult: "**pass**", wantIn: "+500.0 ms, 2.67×"},
		"a timeout waited out: miss":   {blackHole: 2300 * time.Millisecond, wantResult: "**miss**", wantIn: "+2.00 s, 7.67×"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := &report{Scenarios: []scenarioResult{
				{scenario: scenario{Name: "healthy"}, series: series{Samples: runs(300 * time.Millisecond)}},
				{scenario: scenario{Name: "IPv6 black hole"}, series: series{Samples: runs(tc.blackHole)}},
			}}
			var got *target
			for _, tg := range r.Targets() {
				if tg.What == "IPv6 black hole ≤ healthy run + 0.5 s wall" {
					got = &tg
				}
			}
			require.NotNil(t, got)
			assert.Contains(t, got.Result, tc.wantResult)
			assert.Contains(t, got.Measured, tc.wantIn)
		})
	}
}

// TestRunSummary: the sample keeps the duration and failedPhase of the
// engine's last log line when it is the run summary, and nothing otherwise.
func TestRunSummary(t *testing.T) {
	tests := map[string]struct {
		stderr string
		want   sample
	}{
		"registered": {
			stderr: `{"msg":"starting"}` + "\n" + `{"msg":"run finished","durationMs":412.5,"outcome":"registered"}` + "\n",
			want:   sample{HasSummary: true, InProcess: 412500 * time.Microsecond},
		},
		"failed in detect": {
			stderr: `{"msg":"run finished","durationMs":2000,"failedPhase":"detect","error":"no cloud"}`,
			want:   sample{HasSummary: true, InProcess: 2 * time.Second, FailedPhase: "detect"},
		},
		"refused at load: no summary": {
			stderr: `{"msg":"invalid configuration","error":"REGIONSRV_CONFIG: no such file"}`,
		},
		"--version: not JSON": {stderr: "registration-engine v1.2.3\n"},
		"nothing":             {stderr: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, runSummary(tc.stderr))
		})
	}
}

// TestScenarioCheck: a run is timed as a scenario only with its exit code,
// its failedPhase and a run summary exactly when the arguments run a job,
// so that an exit 2 from a setting refused at load is not timed as
// off-cloud.
func TestScenarioCheck(t *testing.T) {
	offCloud := scenario{WantCode: 2, WantPhase: "detect"}
	version := scenario{WantCode: 0, NoSummary: true}
	healthy := scenario{WantCode: 0}
	tests := map[string]struct {
		sc      scenario
		s       sample
		wantErr bool
	}{
		"off-cloud gives up in detect":       {sc: offCloud, s: sample{Code: 2, FailedPhase: "detect", HasSummary: true}},
		"off-cloud refused at load":          {sc: offCloud, s: sample{Code: 2}, wantErr: true},
		"off-cloud failing in another phase": {sc: offCloud, s: sample{Code: 2, FailedPhase: "config", HasSummary: true}, wantErr: true},
		"healthy registers":                  {sc: healthy, s: sample{Code: 0, HasSummary: true}},
		"healthy without a run summary":      {sc: healthy, s: sample{Code: 0}, wantErr: true},
		"healthy with another exit code":     {sc: healthy, s: sample{Code: 1, FailedPhase: "find", HasSummary: true}, wantErr: true},
		"--version runs no job":              {sc: version, s: sample{Code: 0}},
		"--version that ran a job after all": {sc: version, s: sample{Code: 0, HasSummary: true}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.sc.check(tc.s)
			if tc.wantErr {
				assert.Error(t, err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// TestMeasureSizes: the binary's size is its file's, its gzip size what
// its layer costs over the wire; no binary given says so in the report.
func TestMeasureSizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registration-engine")
	require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("registration-engine "), 5000), 0o755))
	s := measureSizes(options{Stripped: path, ImageBytes: 42, ImageNote: "docker build"})
	require.NoError(t, s.BinaryErr)
	assert.EqualValues(t, 100000, s.Binary)
	assert.Positive(t, s.BinaryGzip)
	assert.Less(t, s.BinaryGzip, s.Binary/10, "a repetitive file compresses")
	assert.EqualValues(t, 42, s.Image)

	s = measureSizes(options{ImageNote: "not measured"})
	assert.EqualError(t, s.BinaryErr, "no stripped binary given")
	assert.Equal(t, "not measured", s.ImageNote)
}

// TestImageTargetNotMeasured: without an image, the target says what the
// binary leaves for the rest of it, and nothing when the binary was not
// measured either (no "0.00 MB leaves 25 MB").
func TestImageTargetNotMeasured(t *testing.T) {
	image := func(s sizes) target { return (&report{Sizes: s}).Targets()[5] }
	got := image(sizes{Binary: 17_760_000, ImageNote: "not measured: no Docker daemon"})
	assert.Equal(t, target{"image ≤ 25 MB", "not measured: no Docker daemon",
		"not measured; the binary, the image's one large file, is 17.76 MB (16.94 MiB), which leaves 7.24 MB (6.90 MiB) " +
			"for the base image's CA bundle and passwd"}, got)
	assert.Equal(t, "—", image(sizes{BinaryErr: errors.New("no stripped binary given"), ImageNote: "not measured"}).Result)
}
