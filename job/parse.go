package job

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/hostname"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/providers"
)

// The settings table's small parser library: each function turns one
// setting's text into its Config field, or says what it wants.

// setting is one configurable value: a flag, the environment variables that
// may carry it (first non-empty wins), its default, and how to store it.
type setting struct {
	flag    string
	envs    []string
	def     string
	group   string
	help    string
	boolean bool
	// secret keeps the value out of every message LoadConfig writes: a bad
	// value is shown as REDACTED. Its Config field must be a Secret, so that
	// the log of the effective configuration redacts it too.
	secret bool
	set    func(c *Config, v string) error
}

func str(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error { *dst(c) = v; return nil }
}

// integer takes a whole number ≥ min, for a setting whose bound is the
// root package's own (K8S_RETRY_MAX); a bad value is told the bound,
// whatever was wrong with it.
func integer(min int, dst func(*Config) *int) func(*Config, string) error {
	want := fmt.Errorf("want a whole number ≥ %d", min)
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return want
		}
		*dst(c) = n
		return nil
	}
}

// wholeNumber takes any whole number, for a setting whose range its owner's
// Validate checks; what is not a number is told want, the owner's words
// for the range.
func wholeNumber(want string, dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return errors.New(want)
		}
		*dst(c) = n
		return nil
	}
}

// number takes any number strconv parses (NaN and Inf included), for a
// setting whose range its owner's Validate checks; what is not a number is
// told want, the owner's words for the range.
func number(want string, dst func(*Config) *float64) func(*Config, string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return errors.New(want)
		}
		*dst(c) = f
		return nil
	}
}

func port(dst func(*Config) *int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 65535 {
			return errors.New("want a TCP port 1-65535")
		}
		*dst(c) = n
		return nil
	}
}

// float takes a finite number ≥ min (NaN and Inf, which strconv parses,
// are refused), for a setting whose bound is the root package's own
// (K8S_RETRY_BACKOFF); a bad value is told the bound.
func float(min float64, dst func(*Config) *float64) func(*Config, string) error {
	want := fmt.Errorf("want a number ≥ %g", min)
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || !(f >= min) {
			return want
		}
		*dst(c) = f
		return nil
	}
}

func duration(dst func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := parseDuration(v)
		if err != nil {
			return err
		}
		*dst(c) = d
		return nil
	}
}

func durations(dst func(*Config) *[]time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []time.Duration
		for _, part := range splitList(v) {
			d, err := parseDuration(part)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		*dst(c) = out
		return nil
	}
}

// maxSeconds is the longest duration Go holds (about 292 years), in seconds.
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// parseDuration accepts Go durations ("90s", "1h") and, like the seed's
// numbers, plain seconds ("3600"). Seconds past what a duration holds
// ("Inf", "1e300") are refused as too large: converted, they would wrap
// round to a negative duration.
func parseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		if secs >= maxSeconds {
			return 0, fmt.Errorf("too large: at most 292 years (%.0f seconds)", math.Floor(maxSeconds))
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errors.New(`want a duration such as "90s", "10m" or seconds`)
	}
	return d, nil
}

func addrPort(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		ap, err := netip.ParseAddrPort(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want an IP address and port such as 127.0.0.1:5353")
		}
		*dst(c) = ap.String()
		return nil
	}
}

func boolean(dst func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return errors.New("want true or false")
		}
		*dst(c) = b
		return nil
	}
}

// endpoint takes an http(s) URL; whether it must be https is its owner's
// rule (azure.Config.Validate for Entra and ARM).
func endpoint(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimRight(strings.TrimSpace(v), "/")
		if err := checkURL(v); err != nil {
			return err
		}
		*dst(c) = v
		return nil
	}
}

// metadataEndpoint takes a cloud metadata base URL, by the detector's own
// rule (providers.CheckEndpoint: http(s)://host[:port], no path, query or
// credentials), so that an override the detector would refuse at run time
// is refused at start.
func metadataEndpoint(dst func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		v = strings.TrimRight(strings.TrimSpace(v), "/")
		if err := providers.CheckEndpoint(v); err != nil {
			return err
		}
		*dst(c) = v
		return nil
	}
}

// metadataEndpoints is metadataEndpoint for a comma-separated list.
func metadataEndpoints(dst func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, part := range splitList(v) {
			part = strings.TrimRight(part, "/")
			if err := providers.CheckEndpoint(part); err != nil {
				return err
			}
			out = append(out, part)
		}
		*dst(c) = out
		return nil
	}
}

// hostnames takes a comma-separated list of DNS names, each as
// hostname.Normalize returns it.
func hostnames(dst func(*Config) *[]string) func(*Config, string) error {
	return func(c *Config, v string) error {
		var out []string
		for _, part := range splitList(v) {
			n, err := hostname.Normalize(part)
			if err != nil {
				return err
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return errors.New("want at least one domain")
		}
		*dst(c) = out
		return nil
	}
}

// prefixes takes a comma-separated list of address ranges as
// coredns.ParseClusterRanges reads it (the one parser, which the uninstall
// hook calls too).
func prefixes(dst func(*Config) *[]netip.Prefix) func(*Config, string) error {
	return func(c *Config, v string) error {
		out, err := coredns.ParseClusterRanges(v)
		if err != nil {
			return err
		}
		*dst(c) = out
		return nil
	}
}

func checkURL(v string) error {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return errors.New("want an http(s) URL such as https://host:port")
	}
	return nil
}

// formatDuration writes a default the way a user would set it: 10m, not
// 10m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatDurations writes a default list the way a user would set it.
func formatDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = formatDuration(d)
	}
	return strings.Join(parts, ",")
}

// formatPrefixes writes a default list of address ranges the way a user
// would set it.
func formatPrefixes(ps []netip.Prefix) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, ",")
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
