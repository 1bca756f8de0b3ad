// Package status answers a cluster admin's question "is this cluster
// registered, and if not, why and what do I do?" in one read-only pass: it
// reads the engine's CronJob and Jobs, the Lease, the Secret, CoreDNS's
// entry and rancher/scc-operator's Registration, relates them, and names
// the first broken link with the next step (Decide). A read the API server
// refuses is reported as refused, never taken for a missing object.
package status
