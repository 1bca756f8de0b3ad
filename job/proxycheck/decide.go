package proxycheck

import (
	"fmt"
	"net/url"

	"golang.org/x/net/http/httpproxy"
	corev1 "k8s.io/api/core/v1"

	"github.com/rancher/registration-engine/job/escape"
)

// The variables Go's net/http reads, each lower case first: the upper-case
// one counts only when the lower-case one is unset or empty
// (httpproxy.FromEnvironment, golang.org/x/net v0.62.0).
var (
	httpProxyVars  = []string{"http_proxy", "HTTP_PROXY"}
	httpsProxyVars = []string{"https_proxy", "HTTPS_PROXY"}
	noProxyVars    = []string{"no_proxy", "NO_PROXY"}
	proxyVarNames  = append(append(append([]string{"REQUEST_METHOD"}, httpProxyVars...), httpsProxyVars...), noProxyVars...)
)

// Decision is what the operator's net/http would do with a request to
// registrationUrl.
type Decision struct {
	// ViaProxy: the request goes to Proxy, not to the update server.
	ViaProxy bool
	// Host is registrationUrl's host name (the name NoProxyVariable must
	// carry).
	Host string
	// ProxyVariable is the variable whose proxy the request takes
	// ("HTTPS_PROXY" or "https_proxy" for an https URL); "" when direct.
	ProxyVariable string
	// Proxy is that proxy's host:port, without credentials; "" when direct.
	Proxy string
	// NoProxyVariable is the variable that decides the exceptions: the
	// one Go reads (no_proxy, or NO_PROXY when no_proxy is unset or
	// empty), NO_PROXY when neither is set. It must carry Host for the
	// request to go direct.
	NoProxyVariable string
	// NoProxy is that variable's value.
	NoProxy string
}

// Decide applies Go's proxy rules (golang.org/x/net/http/httpproxy, which
// net/http's ProxyFromEnvironment uses) to env, a container's environment
// as its Deployment spells it, for a request to registrationURL. NO_PROXY's
// forms are httpproxy's own: "*", a host name (which also matches its
// subdomains), ".suffix" (subdomains only), an IP address or CIDR, and any
// of these with ":port"; "localhost" and loopback addresses never use a
// proxy. Later entries of env win over earlier ones of the same name, as
// the kubelet does.
//
// variable is the one a person must change: NoProxyVariable when the
// request goes through a proxy, "" otherwise. An entry that takes its
// value from a ConfigMap or Secret (valueFrom) is ErrUnresolved: its value
// is unknown, and guessing either way would be wrong.
func Decide(env []corev1.EnvVar, registrationURL string) (d Decision, variable string, err error) {
	u, err := url.Parse(registrationURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return Decision{}, "", fmt.Errorf("%w: %q", ErrBadURL, registrationURL)
	}
	vals := map[string]string{}
	for _, e := range env {
		if !isProxyVar(e.Name) {
			continue
		}
		if e.ValueFrom != nil {
			return Decision{}, "", fmt.Errorf("%w: %s comes from %s", ErrUnresolved, e.Name, describeSource(e.ValueFrom))
		}
		vals[e.Name] = e.Value
	}
	cfg := httpproxy.Config{CGI: vals["REQUEST_METHOD"] != ""}
	var httpVar, httpsVar string
	cfg.HTTPProxy, httpVar = first(vals, httpProxyVars)
	cfg.HTTPSProxy, httpsVar = first(vals, httpsProxyVars)
	cfg.NoProxy, d.NoProxyVariable = first(vals, noProxyVars)
	d.NoProxy = cfg.NoProxy
	if d.NoProxyVariable == "" {
		d.NoProxyVariable = "NO_PROXY"
	}
	d.Host = u.Hostname()

	proxy, err := cfg.ProxyFunc()(u)
	if err != nil {
		// An unparseable proxy URL: net/http fails the request, which is
		// as bad as a proxy for the operator; name the variable.
		name := httpsVar
		if u.Scheme == "http" {
			name = httpVar
		}
		return Decision{}, "", fmt.Errorf("proxycheck: %s: %w", name, err)
	}
	if proxy == nil {
		return d, "", nil
	}
	d.ViaProxy, d.Proxy = true, proxy.Host
	d.ProxyVariable = httpsVar
	if u.Scheme == "http" {
		d.ProxyVariable = httpVar
	}
	return d, d.NoProxyVariable, nil
}

// first returns the value and name of the first variable of names that is
// set and not empty, as httpproxy.FromEnvironment reads them.
func first(vals map[string]string, names []string) (value, name string) {
	for _, n := range names {
		if v := vals[n]; v != "" {
			return v, n
		}
	}
	return "", ""
}

func isProxyVar(name string) bool {
	for _, n := range proxyVarNames {
		if n == name {
			return true
		}
	}
	return false
}

func describeSource(s *corev1.EnvVarSource) string {
	switch {
	case s.ConfigMapKeyRef != nil:
		return fmt.Sprintf("ConfigMap %s key %s", s.ConfigMapKeyRef.Name, s.ConfigMapKeyRef.Key)
	case s.SecretKeyRef != nil:
		return fmt.Sprintf("Secret %s key %s", s.SecretKeyRef.Name, s.SecretKeyRef.Key)
	case s.FieldRef != nil:
		return "field " + s.FieldRef.FieldPath
	default:
		return "valueFrom"
	}
}

// Verdict is the text of the permanent error a run returns when the
// operator's request would go through a proxy: which variable of which
// Deployment must carry which name, and how to set it. The value comes
// from the Deployment, foreign text a person pastes with their own
// credentials: every part of the command is shell-quoted (escape.Shell).
func (d Decision) Verdict(namespace, deployment, container string) string {
	next := d.Host
	if d.NoProxy != "" {
		next = d.NoProxy + "," + d.Host
	}
	return fmt.Sprintf("rancher/scc-operator would send its request to https://%s through the proxy %s (%s of Deployment %s/%s, container %s), "+
		"which resolves %s in its own DNS and never sees the cluster's CoreDNS entry, so the registration would fail; "+
		"the engine wrote nothing. Fix: add %s to %s of that Deployment "+
		"(kubectl -n %s set env deployment/%s -c %s %s, or the same in Rancher's proxy settings, which the operator inherits), then run the engine",
		d.Host, d.Proxy, d.ProxyVariable, namespace, deployment, container, d.Host,
		d.Host, d.NoProxyVariable, escape.Shell(namespace), escape.Shell(deployment), escape.Shell(container), escape.Shell(d.NoProxyVariable+"="+next))
}
