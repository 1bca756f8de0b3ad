// Package fakecloud is one importable fake of every peer the engine talks to:
// Azure IMDS (instance data, location, signed attested documents and the AIA
// intermediate), the Entra token endpoint, ARM, SUSE's region servers and the
// SMT/RMT update servers. Unit tests run the real engine code against it over
// real sockets on loopback; the fakecloud binary serves the same handlers for
// `make demo` and the e2e pod.
//
// Each fake is an http.Handler whose fault switches are safe to flip while it
// serves, so a test can break exactly one thing and watch the engine cope.
package fakecloud
