// Package smt finds the update server a cluster registers with (phase 4 of a
// run): it asks SUSE's region servers which SMT/RMT servers serve this
// region, checks that one of them is alive, and downloads its certificate,
// accepted only if its SHA-1 matches the fingerprint the region server
// published.
//
// Everything here follows SUSE's cloudregister client, because SUSE's
// servers are built for it: region servers answer only over TLS with a
// self-signed certificate that each guest pins, one file per server; update
// servers are addressed by IP because their names are not in public DNS. Two
// of the client's bugs are not copied: a success on the last pass counts, and
// every request has a timeout.
//
// The certificate that comes out of Find is what the cluster will trust for
// every registration request. A check skipped here would let whoever answers
// on an update server's address impersonate SUSE, so the fingerprint
// comparison is never optional and a mismatching server is dropped, not
// retried with its certificate trusted.
package smt
