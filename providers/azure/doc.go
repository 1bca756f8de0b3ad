// Package azure proves, in phase 2, that the engine runs on Azure as part of
// the Marketplace offer it claims, and produces the instanceData the SUSE
// update server verifies.
//
// Four independent facts are established, and the run fails closed when
// any of them is missing:
//
//  1. The identity AZURE_CREDENTIAL_MODE names — the pod's workload identity
//     (azidentity.NewWorkloadIdentityCredential) or the extension's managed
//     identity through IMDS (azidentity.NewManagedIdentityCredential with
//     AZURE_CLIENT_ID), never DefaultAzureCredential, which would fall back
//     to whatever identity the node has — may read the cluster extension
//     from ARM, and that extension carries exactly the configured
//     Marketplace plan.
//  2. The extension lives in the subscription of the machine IMDS describes.
//  3. The extension belongs to the cluster the engine runs in: its parent
//     managed cluster, read with the same identity, has the node's IMDS
//     resource group as its node resource group.
//  4. IMDS signs an attested document whose nonce is derived from the plan
//     URN, and that document verifies locally: signature over the content
//     (SHA-256 or better), a signer certificate like Azure's (named under
//     metadata.azure.com or the sovereign clouds' names, on its SAN when it
//     has one; an end-entity TLS certificate), chain to pinned roots,
//     subscriptionId and vmId signed; only then our nonce, and last the
//     node clock: createdOn not ahead of it, expiresOn not passed
//     (transient failures, see checkClock).
//
// These are the engine's own checks, where the operator can fix a wrong
// setting; they do not replace the update server's. Whoever controls the
// cluster controls this binary, so the update server must still verify
// the purchase itself.
//
// Inspect runs the same verification on a document a customer sends, for
// the `attestation inspect` command.
package azure
