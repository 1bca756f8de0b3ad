package azure

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/avast/retry-go/v4"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/pause"
	"github.com/rancher/registration-engine/providers"
)

// Prover proves Azure identity for one run. It implements providers.Prover.
type Prover struct {
	cfg      Config
	resource ExtensionID
	urn      string
	nonce    string
	log      *slog.Logger
	arm      *armClient
	imds     *imdsClient
	chain    *chainVerifier
}

// New validates cfg (Validate, after filling the zero endpoints and retry
// settings with their defaults), checks that every setting Azure needs is
// present, and builds the clients. Every problem is reported at once; all
// of them are permanent (failure.Permanent, ErrConfig): a missing workload
// identity variable names the variable and the pod label that makes the
// webhook inject it.
func New(cfg Config) (*Prover, error) {
	if cfg.ARMEndpoint == "" {
		cfg.ARMEndpoint = DefaultARMEndpoint
	}
	if cfg.IMDSEndpoint == "" {
		cfg.IMDSEndpoint = providers.DefaultAzureIMDS
	}
	if cfg.RetryMax == 0 {
		cfg.RetryMax = DefaultRetryMax
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.RetryUnit <= 0 {
		cfg.RetryUnit = time.Second
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	errs = append(errs, CheckCredential(cfg)...)
	if err := cfg.Validate(); err != nil {
		errs = append(errs, err)
	}
	cfg.ARMEndpoint = strings.TrimRight(cfg.ARMEndpoint, "/")
	cfg.IMDSEndpoint = strings.TrimRight(cfg.IMDSEndpoint, "/")
	var rid ExtensionID
	if strings.TrimSpace(cfg.ExtensionResourceID) == "" {
		bad("EXTENSION_RESOURCE_ID is not set: it is the ARM ID of this cluster extension, %s", extensionIDShape)
	} else if id, err := ParseExtensionID(strings.TrimSpace(cfg.ExtensionResourceID)); err == nil {
		rid = id
	}
	for _, v := range []struct{ name, value string }{
		{"MARKETPLACE_PUBLISHER_ID", cfg.Publisher}, {"MARKETPLACE_OFFER_ID", cfg.Offer}, {"MARKETPLACE_PLAN_ID", cfg.Plan},
	} {
		if strings.TrimSpace(v.value) == "" {
			bad("%s is not set: the Marketplace plan this deployment must carry", v.name)
		}
	}
	if len(errs) > 0 {
		return nil, failure.Permanent(fmt.Errorf("azure: %w: %w", ErrConfig, errors.Join(errs...)))
	}

	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = pause.For
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log = log.With("cloud", "azure")
	var tr trust
	if cfg.Roots != nil {
		tr = trustFromPool(cfg.Roots)
	} else {
		roots, err := productionRoots()
		if err != nil {
			return nil, failure.Permanent(fmt.Errorf("azure: %w: pinned roots: %w", ErrConfig, err))
		}
		tr = trustFromCerts(roots)
	}
	p := &Prover{
		cfg:      cfg,
		resource: rid,
		urn:      URN(cfg.Publisher, cfg.Offer, cfg.Plan),
		log:      log,
		chain:    &chainVerifier{trust: tr, fetch: newAIAFetcher(cfg.AIAClient, cfg.AIAAllowedHosts)},
	}
	p.nonce = Nonce(p.urn)
	p.imds = newIMDSClient(cfg, log)
	var err error
	if p.arm, err = newARMClient(cfg, rid, p.imds.client); err != nil {
		return nil, err
	}
	return p, nil
}

// Prove runs phase 2 on Azure: IMDS compute (subscription, region, node
// resource group), the ARM plan check of the extension, the binding of the
// extension's managed cluster to this node, then the attested document for
// the plan's nonce, verified locally. The error wraps one of the package's
// sentinels and is failure.Permanent when another attempt cannot help.
//
// All of it is a self-check of the engine's own configuration, made where
// the operator can fix it: whoever controls the cluster controls this
// binary too, so the update server must still verify the purchase itself
// (the attested document, its subscription, and that subscription's
// Marketplace purchase of the plan).
func (p *Prover) Prove(ctx context.Context) (*providers.Evidence, error) {
	start := p.cfg.Clock()
	comp, err := p.imds.instanceCompute(ctx)
	if err != nil {
		if ctx.Err() == nil && noConnection(err) {
			return nil, failure.Permanent(fmt.Errorf("azure imds: %w: %s", ErrIMDSUnreachable, imdsRestrictionHint(p.imds, p.cfg.HostNetworkRemedy, err)))
		}
		return nil, fmt.Errorf("azure imds: %w", err)
	}
	if !strings.EqualFold(comp.SubscriptionID, p.resource.SubscriptionID) {
		return nil, failure.Permanent(fmt.Errorf("azure: %w: EXTENSION_RESOURCE_ID is in subscription %s but this machine is in %s "+
			"(an extension of another subscription proves nothing about this cluster)",
			ErrSubscriptionMismatch, p.resource.SubscriptionID, comp.SubscriptionID))
	}

	if err := p.checkPlan(ctx); err != nil {
		return nil, err
	}
	p.log.Info("marketplace plan verified", "phase", "prove", "publisher", p.cfg.Publisher, "offer", p.cfg.Offer,
		"plan", p.cfg.Plan, "durationMs", p.cfg.Clock().Sub(start).Milliseconds())
	if err := p.bindCluster(ctx, comp); err != nil {
		return nil, err
	}
	p.log.Info("extension bound to this cluster", "phase", "prove", "cluster", p.resource.ClusterName,
		"nodeResourceGroup", comp.ResourceGroupName, "durationMs", p.cfg.Clock().Sub(start).Milliseconds())

	sig, err := p.attestedDocument(ctx, comp.SubscriptionID)
	if err != nil {
		return nil, err
	}
	p.log.Info("attested document verified", "phase", "prove", "region", strings.ToLower(comp.Location),
		"durationMs", p.cfg.Clock().Sub(start).Milliseconds())
	doc := InstanceData(comp.SubscriptionID, sig, p.urn)
	return &providers.Evidence{
		Cloud:        providers.Azure,
		InstanceData: doc,
		RegionHint:   strings.ToLower(comp.Location),
		Secrets:      []string{doc, sig},
	}, nil
}

// checkPlan reads the extension and compares its plan with the configured
// one, field by field.
func (p *Prover) checkPlan(ctx context.Context) error {
	ext, err := p.arm.getExtension(ctx)
	if err != nil {
		return fmt.Errorf("azure arm: as the %s: %w", p.cfg.describeIdentity(), err)
	}
	if ext.Plan == nil {
		return failure.Permanent(fmt.Errorf("azure arm: %w: the extension has no plan (expected publisher %q, offer %q, plan %q): "+
			"it was not deployed from the Marketplace offer", ErrPlanMismatch, p.cfg.Publisher, p.cfg.Offer, p.cfg.Plan))
	}
	var diffs []string
	for _, f := range []struct{ what, want, got string }{
		{"publisher (MARKETPLACE_PUBLISHER_ID vs plan.publisher)", p.cfg.Publisher, ext.Plan.Publisher},
		{"offer (MARKETPLACE_OFFER_ID vs plan.product)", p.cfg.Offer, ext.Plan.Product},
		{"plan (MARKETPLACE_PLAN_ID vs plan.name)", p.cfg.Plan, ext.Plan.Name},
	} {
		if f.want != f.got {
			diffs = append(diffs, fmt.Sprintf("%s: expected %q, got %q", f.what, f.want, f.got))
		}
	}
	if len(diffs) > 0 {
		return failure.Permanent(fmt.Errorf("azure arm: %w: %s", ErrPlanMismatch, strings.Join(diffs, "; ")))
	}
	return nil
}

// bindCluster makes sure the extension belongs to the cluster the engine
// runs in. The plan check alone would accept any PAYG extension of the
// subscription, another cluster's included: pointed at it, every cluster
// of the subscription would pass. So the managed cluster that is the
// extension's parent (its ID taken from the same parsed
// EXTENSION_RESOURCE_ID, whose subscription Prove already compared with
// IMDS compute.subscriptionId) is read with the same token, and its
// properties.nodeResourceGroup must be the resource group IMDS says this
// node VM is in. Resource group names are case-insensitive in Azure, and
// ARM and IMDS do not always agree on the case.
func (p *Prover) bindCluster(ctx context.Context, comp *compute) error {
	mc, err := p.arm.getManagedCluster(ctx)
	if err != nil {
		return fmt.Errorf("azure arm: as the %s: %w", p.cfg.describeIdentity(), err)
	}
	nrg := mc.Properties.NodeResourceGroup
	if strings.EqualFold(nrg, comp.ResourceGroupName) {
		return nil
	}
	return failure.Permanent(fmt.Errorf("azure arm: %w: EXTENSION_RESOURCE_ID names managed cluster %q (resource group %s) "+
		"whose node resource group is %s, but this node is in resource group %s (IMDS compute.resourceGroupName): "+
		"EXTENSION_RESOURCE_ID points at another cluster's extension; set it to the ID of this cluster's extension "+
		"(the chart's global.azure.extension.resourceId)",
		ErrClusterMismatch, p.resource.ClusterName, p.resource.ResourceGroup, nrg, comp.ResourceGroupName))
}

// attestedDocument fetches the document for our nonce and verifies it; it
// returns the base64 signature exactly as IMDS sent it.
//
// Everything that tells a forgery from a genuine document is checked first,
// on every document IMDS serves: the signature over the content, the
// signer certificate, its chain to the trust anchors and the signed
// content's required fields. Any of them failing is ErrAttestation,
// permanent and never retried. Only a genuine document can then be a
// cached one: signed for another nonce (IMDS may serve one cached for
// another caller on the node), it is retried within the IMDS retry budget
// and is ErrNonceMismatch, transient, when the budget is spent. An
// intermediate that cannot be fetched is ErrIntermediateUnavailable,
// transient. Last come the checks of the signed times against the node
// clock (checkClock), transient.
func (p *Prover) attestedDocument(ctx context.Context, subscriptionID string) (string, error) {
	var (
		sig     string
		content *signedContent
		chain   []*x509.Certificate
	)
	reject := func(err error) error {
		return retry.Unrecoverable(failure.Permanent(fmt.Errorf("%w: %w", ErrAttestation, err)))
	}
	err := p.imds.retryIMDS(ctx, "attested", func() error {
		r, err := p.imds.attested(ctx, p.nonce)
		if err != nil {
			var se *imdsStatusError
			if errors.As(err, &se) || isTransport(err) {
				return err
			}
			return reject(err)
		}
		d, err := parseDocument(r.Signature)
		if err != nil {
			return reject(err)
		}
		if err := d.verifySignature(); err != nil {
			return reject(err)
		}
		if _, err := d.checkSigner(); err != nil {
			return reject(err)
		}
		now := p.cfg.Clock()
		res := p.chain.verify(ctx, d, now)
		switch {
		case res.unavailable():
			return retry.Unrecoverable(fmt.Errorf("%w: %w", ErrIntermediateUnavailable, res.err))
		case res.err != nil:
			return reject(res.err)
		}
		// The library's own combined check, with the completed chain, as
		// the final gate: signature and chain in one call, with a non-nil
		// pool.
		if err := d.p7.VerifyWithChainAtTime(p.chain.trust.pool, now); err != nil {
			return reject(err)
		}
		c, err := d.parseContent()
		if err == nil {
			err = c.check()
		}
		if err != nil {
			return reject(err)
		}
		if c.Nonce != p.nonce {
			return fmt.Errorf("%w: signed nonce %q, requested %q (IMDS served a cached document)", ErrNonceMismatch, c.Nonce, p.nonce)
		}
		sig, content, chain = r.Signature, c, res.chain
		return nil
	}, func(err error) bool { return errors.Is(err, ErrNonceMismatch) })
	if err != nil {
		if errors.Is(err, ErrAttestation) || errors.Is(err, ErrNonceMismatch) || errors.Is(err, ErrIntermediateUnavailable) {
			return "", fmt.Errorf("azure imds: attested document: %w", err)
		}
		return "", fmt.Errorf("azure imds: attested document: %w: %w", ErrIMDS, err)
	}

	if !strings.EqualFold(content.SubscriptionID, subscriptionID) {
		return "", failure.Permanent(fmt.Errorf("azure imds: attested document: %w: signed subscriptionId %s, compute metadata says %s",
			ErrAttestation, content.SubscriptionID, subscriptionID))
	}
	// Last: only the node clock can be wrong once everything else held.
	if err := checkClock(content, p.cfg.Clock()); err != nil {
		return "", fmt.Errorf("azure imds: attested document: %w", err)
	}
	p.log.Info("attested document chain verified", "phase", "prove", "chain", describeChain(chain))
	return sig, nil
}

// checkClock compares the signed times of a document that passed every
// other check with the node clock: createdOn at most 5 minutes ahead of it
// (ErrDocumentNotYetValid), expiresOn after it (ErrDocumentExpired).
//
// Both failures are transient, whichever way the clock is wrong. By the
// time they are checked the signature over the content, the signer and its
// chain have passed, so the document is Azure's and the times are the ones
// Azure signed: the only thing that can be wrong is the node clock (or, for
// expiresOn, IMDS serving an old document), which the node's time service
// corrects without anyone touching the engine's configuration. Failing the
// Job for good (exit 2) would instead stop the retries that then succeed
// and point the operator at a setting that is not wrong. Nothing is sent
// either way, so no forgery gains from the retry: a forged document fails
// the signature, signer or chain checks first, and those stay permanent.
// The chain's own validity period stays a permanent check too: a genuine
// signer certificate is valid for months, so a clock that makes it look
// expired or not yet valid is off by far more than a drifting node clock,
// and a signer that really expired is no longer Azure's.
func checkClock(c *signedContent, now time.Time) error {
	if err := c.checkCreated(now); err != nil {
		return err
	}
	return c.checkExpiry(now)
}
