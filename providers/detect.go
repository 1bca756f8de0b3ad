package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/providers/dmi"
)

// DefaultAzureIMDS is Azure's instance metadata service: detection probes it
// (phase 1) and the Azure prover asks it for the attested document (phase 2).
const DefaultAzureIMDS = "http://169.254.169.254"

// The real metadata base URLs. Detector fields left nil use these; tests and
// the demo point the fields at loopback fakes instead.
var (
	// DefaultAzureEndpoints: Azure documents no IPv6 endpoint. The seed also
	// probed [::ffff:169.254.169.254], but that is the IPv4-mapped spelling
	// of the same address and Go dials it over AF_INET from the same
	// socket family, so a second probe would only cost a request against
	// IMDS's 5-requests-per-second limit.
	DefaultAzureEndpoints = []string{DefaultAzureIMDS}
	// DefaultGCPEndpoints: the trailing dot makes the name fully qualified,
	// so off Google the resolver does not walk every search domain first.
	DefaultGCPEndpoints = []string{"http://metadata.google.internal.", "http://169.254.169.254", "http://[fd20:ce::254]"}
	// DefaultAWSEndpoints: the IPv6 endpoint exists on Nitro instances with
	// the IPv6 metadata endpoint enabled.
	DefaultAWSEndpoints = []string{"http://169.254.169.254", "http://[fd00:ec2::254]"}
)

// Defaults for the Detector's durations.
const (
	DefaultBudget           = 2 * time.Second
	DefaultDmidecodeTimeout = 2 * time.Second
)

// Detection sources.
const (
	SourceIMDS      = "imds"
	SourceDMI       = "dmi"
	SourceDmidecode = "dmidecode"
)

// azureChassisAssetTag is the chassis asset tag of every Azure VM. It is
// the only DMI value that tells Azure from on-premises Hyper-V, which also
// reports "Microsoft Corporation" / "Virtual Machine".
const azureChassisAssetTag = "7783-7084-3265-9085-8269-3286-77"

// Detection says which cloud this is and how we know.
type Detection struct {
	Cloud Cloud
	// Source is SourceIMDS (proven by the metadata server's answer),
	// SourceDMI or SourceDmidecode (firmware strings only: a hint, which the
	// cloud's identity proof in phase 2 must confirm).
	Source string
	// Endpoint is the metadata base URL that answered (SourceIMDS only).
	Endpoint string
	// Detail is a short, loggable description of the evidence, e.g.
	// "azEnvironment=AzurePublicCloud location=westeurope" or the DMI values.
	Detail string
}

// Detector finds out which cloud the node runs on (phase 1). Its zero value
// probes the real metadata endpoints with a 2 s budget and no DMI or
// dmidecode fallback; production sets DMI and Dmidecode too.
//
// Order of evidence: a metadata server's answer first (proof by content),
// then the DMI files, then dmidecode. All metadata probes run at once under
// one Budget, so a machine without any metadata server is through in about
// Budget rather than the seed's sum of timeouts (up to 22 s).
type Detector struct {
	// AzureEndpoints, GCPEndpoints and AWSEndpoints are metadata base URLs
	// ("http://host[:port]", no path). nil means the Default… list; an
	// empty non-nil slice probes nothing for that cloud.
	AzureEndpoints []string
	GCPEndpoints   []string
	AWSEndpoints   []string
	// HTTP sends the probes. nil means a client that never uses a proxy
	// (see newMetadataClient); a client given here must not use one either,
	// or a proxy may answer for a cloud we are not on.
	HTTP *http.Client
	// Budget bounds all metadata probes together; 0 means DefaultBudget.
	Budget time.Duration
	// DMI is the /sys/class/dmi/id directory, normally
	// os.DirFS(DMI_DIR_PATH); nil skips the DMI check.
	DMI fs.FS
	// Dmidecode returns the output of `dmidecode -s system-manufacturer`;
	// RunDmidecode in production, nil skips the check. It is given
	// DmidecodeTimeout through its context and abandoned when it overruns.
	Dmidecode func(ctx context.Context) (string, error)
	// DmidecodeTimeout bounds Dmidecode; 0 means DefaultDmidecodeTimeout.
	DmidecodeTimeout time.Duration
	// Log receives debug lines per probe and warnings about unreadable DMI
	// files and a failing dmidecode; nil discards them.
	Log *slog.Logger

	// dial replaces the default client's dialer; tests only.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// probeResult is one probe's outcome.
type probeResult struct {
	index  int
	detail string
	err    error
	took   time.Duration
}

// Detect returns the detected cloud, or an error wrapping ErrNoCloud (marked
// failure.Permanent) whose message lists everything that was tried. When
// metadata servers of several clouds answer, Azure wins over GCP over AWS;
// Detect waits for a higher-priority probe only as long as it may still
// succeed, so a proven Azure returns at once and cancels the other probes.
// An invalid endpoint is a permanent ErrInvalidEndpoint; cancellation of ctx
// is returned as is (transient).
func (d *Detector) Detect(ctx context.Context) (Detection, error) {
	log := d.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	probes, err := d.probes()
	if err != nil {
		return Detection{}, failure.Permanent(fmt.Errorf("detect: %w", err))
	}
	client := d.HTTP
	if client == nil {
		client = newMetadataClient(d.dial)
		defer client.CloseIdleConnections()
	}

	var tried []string
	if len(probes) > 0 {
		found, outcomes, err := d.probeAll(ctx, log, client, probes)
		if err != nil {
			return Detection{}, err
		}
		if found.Cloud != None {
			return found, nil
		}
		tried = outcomes
	}

	if d.DMI != nil {
		info, err := dmi.Read(d.DMI)
		if err != nil {
			log.Warn("dmi files unreadable", "error", err.Error())
		}
		log.Debug("dmi read", "sysVendor", info.SysVendor, "productName", info.ProductName, "chassisAssetTag", info.ChassisAssetTag)
		cloud, note := classifyDMI(info)
		if cloud != None {
			return Detection{Cloud: cloud, Source: SourceDMI, Detail: info.String()}, nil
		}
		tried = append(tried, "dmi "+info.String()+note)
	}

	if d.Dmidecode != nil {
		manufacturer, err := d.runDmidecode(ctx)
		switch {
		case errors.Is(err, exec.ErrNotFound):
			log.Debug("dmidecode unavailable", "error", err.Error())
			tried = append(tried, "dmidecode: not installed")
		case err != nil:
			log.Warn("dmidecode failed", "error", err.Error())
			tried = append(tried, err.Error()) // RunDmidecode's errors start "dmidecode: "
		default:
			cloud, note := classifyDMI(dmi.Info{SysVendor: manufacturer})
			if cloud != None {
				return Detection{Cloud: cloud, Source: SourceDmidecode, Detail: fmt.Sprintf("system-manufacturer=%q", manufacturer)}, nil
			}
			tried = append(tried, fmt.Sprintf("dmidecode system-manufacturer=%q%s", manufacturer, note))
		}
	}
	if ctx.Err() != nil {
		return Detection{}, fmt.Errorf("detect: %w", context.Cause(ctx))
	}
	if len(tried) == 0 {
		tried = []string{"nothing (no endpoints, DMI or dmidecode configured)"}
	}
	return Detection{}, failure.Permanent(fmt.Errorf("detect: %w; tried %s", ErrNoCloud, strings.Join(tried, "; ")))
}

// probes lists the IMDS probes in priority order, endpoints validated and
// duplicates within a cloud dropped.
func (d *Detector) probes() ([]probe, error) {
	var probes []probe
	for _, c := range []struct {
		cloud     Cloud
		endpoints []string
		defaults  []string
		run       func(context.Context, *http.Client, string) (string, error)
	}{
		{Azure, d.AzureEndpoints, DefaultAzureEndpoints, probeAzure},
		{GCP, d.GCPEndpoints, DefaultGCPEndpoints, probeGCP},
		{AWS, d.AWSEndpoints, DefaultAWSEndpoints, probeAWS},
	} {
		endpoints := c.endpoints
		if endpoints == nil {
			endpoints = c.defaults
		}
		seen := map[string]bool{}
		for _, e := range endpoints {
			base, err := normalizeEndpoint(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.cloud, err)
			}
			if !seen[base] {
				seen[base] = true
				probes = append(probes, probe{cloud: c.cloud, endpoint: base, run: c.run})
			}
		}
	}
	return probes, nil
}

// probeAll runs every probe concurrently under the budget and decides by
// priority (the order of probes). It returns the detection (Cloud None when
// nothing was proven) with one outcome line per probe for the error message,
// or ctx's error when the caller gave up. It returns only after every probe
// goroutine has finished, so nothing outlives Detect.
func (d *Detector) probeAll(ctx context.Context, log *slog.Logger, client *http.Client, probes []probe) (Detection, []string, error) {
	budget := d.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	expired := fmt.Errorf("%w (%v)", errUnavailable, budget)
	pctx, cancel := context.WithTimeoutCause(ctx, budget, expired)
	defer cancel()

	results := make(chan probeResult, len(probes)) // every sender has a slot: no goroutine blocks
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			start := time.Now()
			detail, err := p.run(pctx, client, p.endpoint)
			if err != nil && pctx.Err() != nil {
				err = context.Cause(pctx)
			}
			results <- probeResult{index: i, detail: detail, err: err, took: time.Since(start)}
		})
	}

	done := make([]*probeResult, len(probes))
	record := func(r probeResult) {
		done[r.index] = &r
		p := probes[r.index]
		switch {
		case r.err == nil:
			log.Debug("imds probe proved cloud", "cloud", string(p.cloud), "endpoint", p.endpoint, "durationMs", r.took.Milliseconds())
		case !errors.Is(r.err, context.Canceled): // cancelled after the decision: not interesting
			log.Debug("imds probe failed", "cloud", string(p.cloud), "endpoint", p.endpoint, "durationMs", r.took.Milliseconds(), "error", describe(r.err))
		}
	}
	for decided := false; !decided; {
		select {
		case r := <-results:
			record(r)
			_, decided = decide(probes, done)
		case <-pctx.Done():
			decided = true
		}
	}
	cancel()
	wg.Wait()
	close(results)
	for r := range results {
		record(r)
	}
	if ctx.Err() != nil {
		return Detection{}, nil, fmt.Errorf("detect: %w", context.Cause(ctx))
	}
	// Every probe has finished now, so this is final: the decision made
	// above, or after the budget ran out the best cloud proven in time.
	if winner, _ := decide(probes, done); winner >= 0 {
		p := probes[winner]
		return Detection{Cloud: p.cloud, Source: SourceIMDS, Endpoint: p.endpoint, Detail: done[winner].detail}, nil, nil
	}
	outcomes := make([]string, len(probes))
	for i, p := range probes {
		outcomes[i] = fmt.Sprintf("imds %s %s: %s", p.cloud, p.endpoint, describe(done[i].err))
	}
	return Detection{}, outcomes, nil
}

// decide applies the priority to the results so far (probes are ordered by
// cloud priority, done[i] is nil while probe i runs). The highest-priority
// cloud with a proven probe wins, unless a cloud above it still has a probe
// running; then it is not decided yet. decided with winner -1 means every
// probe failed.
func decide(probes []probe, done []*probeResult) (winner int, decided bool) {
	for i := 0; i < len(probes); {
		cloud := probes[i].cloud
		pending, proven := false, -1
		for ; i < len(probes) && probes[i].cloud == cloud; i++ {
			switch r := done[i]; {
			case r == nil:
				pending = true
			case r.err == nil && proven < 0:
				proven = i
			}
		}
		if proven >= 0 {
			return proven, true
		}
		if pending {
			return -1, false
		}
	}
	return -1, true
}

// classifyDMI maps firmware strings to a cloud, returning a note for the
// ErrNoCloud message when it finds none. Azure needs its chassis asset tag
// (or the word "azure"): "Microsoft Corporation" alone is also on-premises
// Hyper-V, and calling that Azure would send a Hyper-V host into Azure's
// identity proof with a misleading "IMDS unreachable" error instead of "no
// supported cloud". The seed matched "microsoft" too; we deliberately do
// not. GCP is "google", AWS "amazon" or "ec2" (Nitro: sys_vendor "Amazon
// EC2").
func classifyDMI(i dmi.Info) (Cloud, string) {
	vendor := strings.ToLower(i.SysVendor + "\n" + i.ProductName)
	all := vendor + "\n" + strings.ToLower(i.ChassisAssetTag)
	switch {
	case i.ChassisAssetTag == azureChassisAssetTag || strings.Contains(all, "azure"):
		return Azure, ""
	case strings.Contains(all, "google"):
		return GCP, ""
	case strings.Contains(all, "amazon") || strings.Contains(vendor, "ec2"):
		return AWS, ""
	case strings.Contains(all, "microsoft"):
		return None, " (Microsoft without Azure's chassis asset tag: on-premises Hyper-V, not Azure)"
	case i.Empty():
		return None, " (no DMI values)"
	}
	return None, ""
}

// runDmidecode calls d.Dmidecode with its timeout, and stops waiting when
// the timeout passes even if the function ignores its context.
func (d *Detector) runDmidecode(ctx context.Context) (string, error) {
	timeout := d.DmidecodeTimeout
	if timeout <= 0 {
		timeout = DefaultDmidecodeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		out string
		err error
	}
	ch := make(chan answer, 1) // a late answer is dropped, its goroutine still ends
	go func() {
		out, err := d.Dmidecode(ctx)
		ch <- answer{out, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			return "", a.err
		}
		return manufacturerLine(a.out), nil
	case <-ctx.Done():
		return "", fmt.Errorf("dmidecode: no answer within %v: %w", timeout, ctx.Err())
	}
}

// manufacturerLine picks the value out of dmidecode's output, which may
// carry "# …" remarks about the SMBIOS version, and bounds its length for
// the error message.
func manufacturerLine(out string) string {
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if len(line) > 128 {
			line = line[:128]
		}
		return strings.ToValidUTF8(line, "\uFFFD")
	}
	return ""
}

// RunDmidecode runs `dmidecode -s system-manufacturer` until ctx ends; it is
// what production sets as Detector.Dmidecode. dmidecode needs root and is
// absent from most images, so its failures are expected: a missing binary
// wraps exec.ErrNotFound; a permission problem carries dmidecode's own
// first stderr line. Output is capped at 4 KiB.
func RunDmidecode(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "dmidecode", "-s", "system-manufacturer")
	stdout, stderr := &cappedBuffer{max: 4 << 10}, &cappedBuffer{max: 4 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = 200 * time.Millisecond // a killed dmidecode's children must not hold its pipes open
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("dmidecode: %w", ctx.Err())
		}
		if line, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n"); line != "" {
			return "", fmt.Errorf("dmidecode: %w: %s", err, strings.ToValidUTF8(line, "\uFFFD"))
		}
		return "", fmt.Errorf("dmidecode: %w", err)
	}
	return stdout.String(), nil
}

// cappedBuffer keeps the first max bytes written and discards the rest
// without failing the writer.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
