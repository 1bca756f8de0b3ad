package coredns

import "errors"

var (
	// ErrInvalidHostsEntry means the name or address to publish in CoreDNS
	// is unusable (not a DNS host name, or not a plain IP address). Nothing
	// is written: the value would land verbatim in CoreDNS's configuration.
	ErrInvalidHostsEntry = errors.New("invalid hosts entry")

	// ErrCorefile means the CoreDNS configuration cannot take the entry
	// safely: no root server block, a hosts directive without a block, a
	// hosts block elsewhere that would make CoreDNS refuse to start, or a
	// server block of its own (in the Corefile, or a coredns-custom .server
	// key) for a zone that covers the name, which answers instead of the
	// root block, so the entry would never be served.
	// Permanent: a person has to add the entry, or turn IN_CLUSTER_DNS off.
	ErrCorefile = errors.New("coredns configuration cannot take the hosts entry")

	// ErrNoCoreDNS means kube-system has neither coredns-custom nor coredns
	// (a cluster DNS other than CoreDNS). Permanent.
	ErrNoCoreDNS = errors.New("no CoreDNS configuration found")

	// ErrNoReload means CoreDNS's Corefile has no reload directive, so it
	// would not load an entry without a restart, which the engine does not
	// do (it has no access to CoreDNS's Deployment). Nothing is written.
	// Permanent: a person adds reload, or the entry, by hand.
	ErrNoReload = errors.New("coredns does not reload its configuration")

	// ErrPolicyRefused means the cluster's admission policy for the
	// engine's CoreDNS edits (PolicyName) refused this edit. Permanent: a
	// person adds the entry, or installs the policy of this release.
	ErrPolicyRefused = errors.New("coredns edit refused by the admission policy")

	// ErrPolicyCostLimit means the API server refused the engine's edit
	// because the admission policy's expressions ran out of its CEL cost
	// limit: the Corefile is longer than the policy supports
	// (PolicyMaxLines), whatever the edit. Permanent: a person shortens
	// the Corefile or adds the entry by hand.
	ErrPolicyCostLimit = errors.New("coredns edit refused: the admission policy's cost limit")
)
