package proxycheck_test

import (
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpproxy"
)

// proxyFromEnvironmentFresh is net/http's ProxyFromEnvironment without its
// once-per-process cache of the environment: the same httpproxy rules,
// read from the environment as it is now.
func proxyFromEnvironmentFresh(req *http.Request) (*url.URL, error) {
	return httpproxy.FromEnvironment().ProxyFunc()(req.URL)
}
