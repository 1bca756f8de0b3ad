// Package hostname is the one rule for the update server's host name, which
// a region server hands out and the engine then writes into two places that
// parse it: the registration URL (phase 6, the Secret) and the cluster's
// CoreDNS configuration (phase 6, the in-cluster name). Phase 4 checks the
// name with Normalize when it reads the region data, so a name the CoreDNS
// editor would refuse is refused while a sibling can still be tried; the
// CoreDNS editor checks it again with the same function before it writes.
//
// A second, looser validator anywhere else would reopen the gap this package
// closes: a name phase 4 accepts and phase 6 refuses fails the whole run
// after the update server was chosen.
package hostname

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid marks a string that is not a host name the engine accepts.
var ErrInvalid = errors.New("not a host name")

// Normalize returns name lower case and without a trailing dot when it is an
// RFC 1123 host name with at least two labels: letters, digits and inner
// hyphens, at most 63 bytes a label and 253 in all. Anything else (a single
// label such as "localhost", an underscore, a space, a brace or a newline,
// which would break a Corefile or a URL) is an error wrapping ErrInvalid
// that says which rule the name broke.
func Normalize(name string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	switch {
	case n == "":
		return "", fmt.Errorf("%q: %w: empty", name, ErrInvalid)
	case len(n) > 253:
		return "", fmt.Errorf("%q: %w: longer than 253 bytes", name, ErrInvalid)
	case !strings.Contains(n, "."):
		return "", fmt.Errorf("%q: %w: a single label, not a fully qualified name", name, ErrInvalid)
	}
	for label := range strings.SplitSeq(n, ".") {
		switch {
		case label == "":
			return "", fmt.Errorf("%q: %w: empty label", name, ErrInvalid)
		case len(label) > 63:
			return "", fmt.Errorf("%q: %w: label longer than 63 bytes", name, ErrInvalid)
		case label[0] == '-' || label[len(label)-1] == '-':
			return "", fmt.Errorf("%q: %w: label %q starts or ends with '-'", name, ErrInvalid, label)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("%q: %w: character %q (only letters, digits and '-')", name, ErrInvalid, c)
			}
		}
	}
	return n, nil
}

// Under reports whether name (normalised) is domain itself or a name below
// it: "smt-azure.susecloud.net" is under "susecloud.net",
// "evilsusecloud.net" is not. Case and a trailing dot on either side do not
// matter.
func Under(name, domain string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	domain = strings.ToLower(strings.TrimSuffix(domain, "."))
	if domain == "" {
		return false
	}
	return name == domain || strings.HasSuffix(name, "."+domain)
}
