package operator

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The scc-operator contract: the one Secret rancher/scc-operator reads to
// register the cluster. Names and keys come from rancher/scc-operator
// (internal/consts/secrets.go, pkg/controllers/resources.go,
// pkg/controllers/helpers/ownership.go on main; registrationUrlCert from
// branch add-rmt-support, PR #112). A typo here is not caught by anything but
// the operator, which then silently ignores the key, so every use goes
// through these constants.
const (
	// SecretName is the operator's entrypoint Secret
	// (ResourceSCCEntrypointSecretName). Deleting it deregisters the cluster.
	SecretName = "scc-registration"
	// Namespace is the operator's default system namespace
	// (DefaultSCCNamespace, flag operator-namespace).
	Namespace = "cattle-scc-system"
	// Deployment is the operator's Deployment as Rancher installs it, named
	// after the operator (--operator-name's default); the proxy check reads
	// its environment.
	Deployment = "rancher-scc-operator"

	// KeyRegistrationType must be "online": the operator knows only online
	// and offline, and a PAYG or RMT registration is online with a URL.
	KeyRegistrationType = "registrationType"
	// KeyRegistrationURL is the update server's base URL, https://<fqdn>
	// with no trailing slash. The operator joins paths to it as plain
	// strings, so a bare host or IP fails with "unsupported protocol scheme".
	KeyRegistrationURL = "registrationUrl"
	// KeyRegCode is the registration code; the operator refuses online
	// registration without one.
	KeyRegCode = "regCode"
	// KeyInstanceData is the cloud's signed identity document
	// (<document>…</document>). The operator on main ignores it; it is
	// written so that an operator that forwards it needs no engine change.
	KeyInstanceData = "instanceData"
	// KeyRegistrationURLCert is the update server's PEM certificate; the
	// operator with PR #112 trusts only its first block for the URL.
	KeyRegistrationURLCert = "registrationUrlCert"

	// RegistrationTypeOnline is the only registration type the engine
	// writes.
	RegistrationTypeOnline = "online"
)

// valueKeys are every key the engine has ever written to the Secret,
// in a stable order. Server-side apply deletes a key that a manager owned
// and stops applying, so a key may be added here but never removed without
// a migration: dropping one would delete it from every cluster's Secret.
var valueKeys = []string{
	KeyRegistrationType,
	KeyRegistrationURL,
	KeyRegCode,
	KeyInstanceData,
	KeyRegistrationURLCert,
}

// ValueKeys returns the keys the engine writes to the Secret, in a
// stable order, for a reader such as the status subcommand that reports on
// each of them.
func ValueKeys() []string { return slices.Clone(valueKeys) }

// Values is what phases 1–5 found: the values of the Secret the
// operator reads. RegCode and InstanceData are secret; log Redacted, never
// Data.
type Values struct {
	// URL is https://<update server FQDN>, never the raced IP: any change
	// of it makes the operator deregister and register afresh.
	URL string
	// RegCode is the SUSE/Rancher registration code. Empty means none is
	// configured: SecretStore then keeps the code the Secret holds (and
	// fails when it holds none), it never blanks it.
	RegCode string
	// InstanceData is the <document>…</document> attested document.
	InstanceData string
	// CertPEM is the update server's validated certificate.
	CertPEM []byte
	// Left is when the engine's last run ended with the Secret in place
	// (registered or unchanged); nil when it did not, or there is no
	// record. A Secret absent now was deleted by someone since: Write does
	// not recreate it in this run (ErrSecretDeleted). Not a data key.
	Left *time.Time
}

// Data returns the Secret's data keys, exactly as written. It holds the
// registration code and the attested document in clear text: hand it to the
// API server only, never to a log.
func (r Values) Data() map[string]string {
	return map[string]string{
		KeyRegistrationType:    RegistrationTypeOnline,
		KeyRegistrationURL:     r.URL,
		KeyRegCode:             r.RegCode,
		KeyInstanceData:        r.InstanceData,
		KeyRegistrationURLCert: string(r.CertPEM),
	}
}

// Redacted returns the same keys as Data with the registration code and the
// instance data replaced by their length, for --dry-run output and logs. An
// empty value stays empty, so a reader can still see that a code is missing.
func (r Values) Redacted() map[string]string {
	d := maps.Clone(r.Data())
	for _, k := range []string{KeyRegCode, KeyInstanceData} {
		if v := d[k]; v != "" {
			d[k] = fmt.Sprintf("REDACTED (%d bytes)", len(v))
		}
	}
	return d
}
