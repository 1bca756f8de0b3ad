package job

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// ErrProxyURL marks a proxy variable whose URL Go's net/http cannot use
// (permanent, like every configuration problem). net/http's
// ProxyFromEnvironment drops a proxy URL it cannot parse without a word
// (vendor/golang.org/x/net/http/httpproxy, config.init ignores
// parseProxy's error), so Entra, ARM and the region servers would be
// reached directly: timeouts that never name the proxy, or a way around the
// customer's egress control.
var ErrProxyURL = errors.New("a proxy URL Go cannot use")

// proxyVars are the proxy variables Go reads. Of a pair, the standard
// library's net/http (Entra, ARM) reads the upper-case one first, and
// golang.org/x/net's httpproxy (job/smt's region servers) the lower-case
// one first: each is used by one of them when both are set, so each is
// checked.
var proxyVars = []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"}

// proxyEnvProblems checks the proxy variables as Go would parse them, and
// returns one problem for each Go could not use.
func proxyEnvProblems(getenv func(string) string) []error {
	var problems []error
	for _, name := range proxyVars {
		if v := getenv(name); v != "" {
			if why := proxyURLProblem(v); why != "" {
				problems = append(problems, fmt.Errorf("%s=%q: %w: %s", name, maskProxyURL(v), ErrProxyURL, why))
			}
		}
	}
	return problems
}

// percentEncode is how to write a proxy URL's credentials so that Go
// parses them.
const percentEncode = "percent-encode it: in the user name and password write % as %25, / as %2F, # as %23, ? as %3F, @ as %40 and : as %3A"

// proxyURLProblem says why net/http cannot use proxy v, or "". It parses
// v as httpproxy's parseProxy does (golang.org/x/net v0.62.0,
// http/httpproxy/proxy.go): as a URL, and when that gives no scheme or no
// host, as "http://" + v, which is how a bare host:port is meant. A value
// that already names a scheme (://) and does not parse is not a bare
// host:port: parseProxy's second try then makes "http://http://…" of it, a
// proxy at the host "http", or fails and the proxy is dropped.
func proxyURLProblem(v string) string {
	u, err := url.Parse(v)
	if err != nil || u.Scheme == "" || u.Host == "" {
		if strings.Contains(v, "://") {
			return "Go cannot parse it, so the engine's requests would not use this proxy (a %, /, #, ?, @ or : in the user name or password?); " + percentEncode
		}
		if u, err = url.Parse("http://" + v); err != nil || u.Host == "" {
			return "Go cannot parse it as a URL or as host:port; set it as http://host:port, and " + percentEncode
		}
	}
	switch u.Scheme {
	case "http", "https", "socks5", "socks5h":
	default:
		return fmt.Sprintf("scheme %q: Go's proxies are http://, https:// or socks5://", u.Scheme)
	}
	if u.Hostname() == "" {
		return "no host"
	}
	if u.Fragment != "" || u.RawQuery != "" || strings.Trim(u.Path, "/") != "" {
		// http://u:p#ss@proxy:3128 parses, as a proxy at the host "p"
		// with the fragment "ss@proxy:3128".
		return "Go parses it with a path, a query or a fragment, which a proxy URL has none of, so the host it would use is not the one meant (a /, ? or # in the user name or password?); " + percentEncode
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("port %s: want 1 to 65535", p)
		}
	}
	return ""
}

// maskProxyURL is v without its password, also when v does not parse (so
// url.URL.Redacted cannot help): everything between "scheme://" and the
// last "@" is credentials, of which the user name before the first ":"
// is shown. A password may hold "/", "#", "?" or "@" unencoded, the very
// characters that make v unparseable, so no earlier delimiter ends it.
func maskProxyURL(v string) string {
	prefix, rest := "", v
	if i := strings.Index(v, "://"); i >= 0 {
		prefix, rest = v[:i+3], v[i+3:]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return v
	}
	user, _, hasPassword := strings.Cut(rest[:at], ":")
	if !hasPassword {
		user = "REDACTED" // a token as the user name
	} else {
		user += ":REDACTED"
	}
	return prefix + user + rest[at:]
}
