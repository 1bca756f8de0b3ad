package proxycheck

import "errors"

var (
	// ErrNoDeployment: the operator's Deployment is not there (another
	// name, or the operator installed some other way). The caller says so
	// once and goes on without the check.
	ErrNoDeployment = errors.New("rancher/scc-operator's Deployment not found")
	// ErrUnresolved: a proxy variable of the operator's container comes
	// from a ConfigMap or Secret (valueFrom, envFrom) that the engine may
	// not read, so the decision cannot be made; the caller says so once
	// and goes on.
	ErrUnresolved = errors.New("the operator's proxy settings come from objects the engine does not read")
	// ErrBadURL: registrationUrl is not an absolute http(s) URL.
	ErrBadURL = errors.New("registrationUrl is not an absolute http(s) URL")
)
