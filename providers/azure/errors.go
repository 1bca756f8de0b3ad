package azure

import "errors"

// Sentinels of phase 2 on Azure. Every error Prove returns wraps one of them
// (test with errors.Is); whether another attempt can help is carried
// separately by failure.Permanent, as noted per sentinel.
var (
	// ErrConfig: a required setting is missing or malformed (permanent).
	ErrConfig = errors.New("invalid configuration")
	// ErrExtensionID: EXTENSION_RESOURCE_ID does not follow the ARM grammar
	// of a cluster extension's ID (permanent; New wraps it in ErrConfig).
	ErrExtensionID = errors.New("not a cluster extension's resource ID")
	// ErrToken: Entra ID did not issue a token for the workload identity
	// (or IMDS for the managed identity, in managed-identity mode).
	// Settling (failure.Settling) when the request was rejected (federated
	// credential, client or tenant wrong, or not yet propagated; IMDS:
	// identity not found, or not yet attached): the run retries it within
	// its first-contact window and marks it permanent after. Transient when
	// the token service could not be reached or kept throttling.
	ErrToken = errors.New("no token for the identity")
	// ErrARM: reading the extension or its managed cluster from ARM failed.
	// Settling (failure.Settling) for 401 and 403 (an identity or role
	// assignment Azure may still be propagating; permanent once the run's
	// first-contact window has closed); permanent for 404 (the resource ID)
	// and for a body that is not the resource; transient otherwise.
	ErrARM = errors.New("cannot read from ARM")
	// ErrPlanMismatch: the extension has no Marketplace plan or another one
	// than configured (permanent: the deployment is not what it claims).
	ErrPlanMismatch = errors.New("marketplace plan mismatch")
	// ErrSubscriptionMismatch: the extension lives in another subscription
	// than the machine IMDS describes (permanent: a cross-subscription
	// extension is tampering).
	ErrSubscriptionMismatch = errors.New("subscription mismatch")
	// ErrClusterMismatch: the managed cluster EXTENSION_RESOURCE_ID names is
	// not the cluster the engine runs in: its properties.nodeResourceGroup
	// is not the node's IMDS compute.resourceGroupName. Permanent: the
	// setting points at another cluster's extension, whose plan proves
	// nothing about this one.
	ErrClusterMismatch = errors.New("extension belongs to another cluster")
	// ErrIMDS: the instance metadata service failed or answered nonsense
	// (transient: IMDS recovers, and its 410/429/500 are already retried).
	ErrIMDS = errors.New("instance metadata unavailable")
	// ErrIMDSUnreachable: no attempt to reach IMDS got a connection (the
	// connect timed out or was refused), although detection said Azure.
	// IMDS runs on the node's host, so that is not load: something drops
	// the pod's packets, most likely AKS's IMDS restriction
	// (--enable-imds-restriction), which lets only hostNetwork pods reach
	// 169.254.169.254. Permanent: every retry meets the same rule; the fix
	// is the chart value hostNetwork (or lifting the restriction).
	ErrIMDSUnreachable = errors.New("instance metadata unreachable from this pod")
	// ErrAttestation: the attested document failed verification: bad or
	// SHA-1 signature, a signer certificate unlike Azure's, chain to an
	// unknown root or through an issuer its AIA URL does not serve,
	// malformed envelope or content, subscriptionId or vmId missing, a
	// timestamp that does not parse (permanent). Checked before the nonce
	// and the clock, so a forgery is never mistaken for a cached document
	// or a wrong clock.
	ErrAttestation = errors.New("attested document rejected")
	// ErrNonceMismatch: IMDS kept serving a document signed for another nonce
	// (a cache primed by another caller on the node) after every retry.
	// Transient: the signature is genuine and the cache expires within
	// minutes, so the next Job attempt or the next schedule succeeds.
	ErrNonceMismatch = errors.New("nonce mismatch")
	// ErrDocumentExpired: the signed expiresOn of a document that passed
	// every other check has passed by the node clock. Transient: IMDS
	// hands out a fresh document; a persistent one points at a node clock
	// that is ahead.
	ErrDocumentExpired = errors.New("attested document expired")
	// ErrDocumentNotYetValid: the signed createdOn of a document that
	// passed every other check lies more than maxClockAhead after the node
	// clock: the clock is behind. Transient, like ErrDocumentExpired: the
	// node's time service corrects it, and the same configuration then
	// succeeds (see checkClock).
	ErrDocumentNotYetValid = errors.New("attested document dated ahead of the node clock")
	// ErrIntermediateUnavailable: the signer's issuing CA could not be
	// fetched from its AIA URLs (at most two per certificate, within one
	// time budget), so the chain could not be checked at all. Transient
	// (network), and never reported as a forgery. A certificate that was
	// fetched but did not issue the signer is ErrAttestation.
	ErrIntermediateUnavailable = errors.New("intermediate certificate unavailable")
)

// configError is a problem with one setting: its message unchanged (it
// names the variable and the fix), and errors.Is(err, ErrConfig) true.
type configError struct{ err error }

func (e configError) Error() string        { return e.err.Error() }
func (e configError) Unwrap() error        { return e.err }
func (e configError) Is(target error) bool { return target == ErrConfig }
