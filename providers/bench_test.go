package providers

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// The two benchmarks below show what probing concurrently buys on a host
// with no metadata server, such as an on-premises cluster or an AKS node
// with IMDS blocked: every metadata address accepts the connection and
// never answers. They use the production client and timeouts, so one
// operation takes seconds; with the default -benchtime=1s each runs a
// single operation (about 2 s and 16 s, well under a minute together).
// Compare the seconds/op metric:
//
//	go test -run '^$' -bench 'BenchmarkDetect' ./providers/
//
// The endpoint set is one per default endpoint (Azure 1, GCP 3, AWS 2). The
// seed probed Azure twice (the IPv4-mapped address too) and so took 22 s;
// that probe is dropped here as it is in Detect.

const seedTimeout = 2 * time.Second

func silentEndpoints(b *testing.B) (azure, gcp, aws []string) {
	azure = []string{hanging(b)}
	gcp = []string{hanging(b), hanging(b), hanging(b)}
	aws = []string{hanging(b), hanging(b)}
	return azure, gcp, aws
}

// BenchmarkDetectNothingListening is Detect: every probe at once under one
// 2 s budget.
func BenchmarkDetectNothingListening(b *testing.B) {
	azure, gcp, aws := silentEndpoints(b)
	d := &Detector{AzureEndpoints: azure, GCPEndpoints: gcp, AWSEndpoints: aws, Budget: DefaultBudget}
	start := time.Now()
	for range b.N {
		if _, err := d.Detect(b.Context()); err == nil {
			b.Fatal("detected a cloud where nothing answers")
		}
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "seconds/op")
}

// BenchmarkDetectSequential is the seed's way: one endpoint after another,
// 2 s each, and for AWS 2 s for the token PUT and another 2 s for the
// IMDSv1 fallback.
func BenchmarkDetectSequential(b *testing.B) {
	azure, gcp, aws := silentEndpoints(b)
	client := newMetadataClient(nil)
	defer client.CloseIdleConnections()
	step := func(ctx context.Context, run func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, seedTimeout)
		defer cancel()
		return run(ctx)
	}
	start := time.Now()
	for range b.N {
		found := false
		for _, e := range azure {
			found = found || step(b.Context(), func(ctx context.Context) error { _, err := probeAzure(ctx, client, e); return err }) == nil
		}
		for _, e := range gcp {
			found = found || step(b.Context(), func(ctx context.Context) error { _, err := probeGCP(ctx, client, e); return err }) == nil
		}
		for _, e := range aws {
			_ = step(b.Context(), func(ctx context.Context) error {
				_, err := get(ctx, client, http.MethodPut, e+awsTokenPath, map[string]string{"X-aws-ec2-metadata-token-ttl-seconds": "60"}, maxAWSToken)
				return err
			})
			found = found || step(b.Context(), func(ctx context.Context) error {
				_, err := get(ctx, client, http.MethodGet, e+awsIdentityPath, nil, maxAWSIdentity)
				return err
			}) == nil
		}
		if found {
			b.Fatal("detected a cloud where nothing answers")
		}
	}
	b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "seconds/op")
}
