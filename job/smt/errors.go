package smt

import (
	"errors"
	"fmt"
)

// Sentinels for every way Find can fail. Errors wrap one of them; errors.Is
// tells them apart. Unless noted, they are transient: region and update
// servers go down and come back, and the next run may succeed.
var (
	// ErrNoRegionServer means no region server (or metadata server) gave
	// usable data in any pass. The error lists each server's last failure.
	// Marked failure.Permanent when nothing could even be asked: no servers
	// configured, or none with a pinned certificate.
	ErrNoRegionServer = errors.New("no region server answered")

	// ErrPinnedCert means a region server's pinned certificate file is
	// missing or holds no certificate; that server is skipped.
	ErrPinnedCert = errors.New("pinned certificate unusable")

	// ErrRegionData means a region server answered 200 with something that
	// is not usable region data: not <regionSMTdata>, or no entry with a
	// name, a fingerprint and a valid address.
	ErrRegionData = errors.New("unusable region data")

	// ErrInvalidEntry marks one update-server entry of the region data that
	// had to be skipped; ParseRegionData reports one per skipped entry.
	ErrInvalidEntry = errors.New("invalid update server entry")

	// ErrNoUpdateServer means every update server the region data named
	// was rejected. The error lists each one and why.
	ErrNoUpdateServer = errors.New("no usable update server")

	// ErrRefused means an update server entry was refused for its name or
	// its address before anything was sent to it: the name is not under an
	// allowed domain or is under the cluster domain, or an address is
	// loopback or link-local. The error names the rule; the next entry is
	// tried. (An unspecified or multicast address never gets this far: its
	// entry is skipped when the region data is parsed.)
	ErrRefused = errors.New("update server refused")

	// ErrClusterDomain means an allowed domain is, lies under or covers the
	// cluster domain (CheckDomain): a configuration error, refused at load.
	ErrClusterDomain = errors.New("the cluster's own DNS domain")

	// ErrNotResponsive means an update server's health check did not say
	// "online" on any of its addresses.
	ErrNotResponsive = errors.New("update server not responsive")

	// ErrNoCertificate means an update server published no PEM certificate
	// at /smt.crt or /rmt.crt, or something that is not one.
	ErrNoCertificate = errors.New("no update server certificate")

	// ErrFingerprint means the certificate an update server published does
	// not match the fingerprint its region server advertised. The server is
	// rejected and its certificate never used.
	ErrFingerprint = errors.New("certificate fingerprint mismatch")

	// ErrBodyTooLarge means a response body exceeded Finder.MaxBody.
	ErrBodyTooLarge = errors.New("response body too large")
)

// StatusError is a response with an unexpected HTTP status. Callers that
// need the code (404 from an old SMT's health API) use errors.As.
type StatusError struct {
	URL  string
	Code int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GET %s: HTTP %d", e.URL, e.Code)
}
