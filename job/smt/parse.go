package smt

import (
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/hostname"
)

// Entry is one update server as the region data describes it. Only entries
// ParseRegionData or ParseMetadata accepted exist: Name and Fingerprint are
// set and at least one of IPv4 and IPv6 is valid.
type Entry struct {
	// Name is SMTserverName, the FQDN the server's certificate is issued
	// for and the host of the registration URL, as hostname.Normalize
	// returns it (lower case, no trailing dot), so it is safe to put into a
	// URL or a hosts entry. Whether its domain is one the engine accepts is
	// decided later, by the Finder.
	Name string
	// IPv4 and IPv6 are the server's addresses; the zero Addr when the
	// region data says "None" or nothing.
	IPv4, IPv6 netip.Addr
	// Registry is SMTregistryName; "" when absent.
	Registry string
	// Region is the region the server belongs to; "unknown" when absent,
	// as in cloudregister. Entries of one region are siblings that share
	// registrations.
	Region string
	// Fingerprint is the certificate's SHA-1 as published: hex, usually
	// upper case in colon-separated pairs. It is 40 hex digits once the
	// colons are removed.
	Fingerprint string
}

// regionSMTdata is the region server's answer. Attributes are matched by
// name: their order differs between server versions.
type regionSMTdata struct {
	XMLName xml.Name  `xml:"regionSMTdata"`
	Servers []smtInfo `xml:"smtInfo"`
}

type smtInfo struct {
	IPv4        string `xml:"SMTserverIP,attr"`
	IPv6        string `xml:"SMTserverIPv6,attr"`
	Name        string `xml:"SMTserverName,attr"`
	Registry    string `xml:"SMTregistryName,attr"`
	Fingerprint string `xml:"fingerprint,attr"`
	Region      string `xml:"region,attr"`
}

// ParseRegionData reads a region server's <regionSMTdata> answer. It returns
// the usable entries in the order the server sent them and, for every entry
// it skipped, an error wrapping ErrInvalidEntry that says which entry and
// why, for the caller to log. err (wrapping ErrRegionData) is set when the
// body is not region data at all or holds no usable entry; a caller must not
// treat an empty answer as "no update servers exist".
func ParseRegionData(body []byte) (entries []Entry, skipped []error, err error) {
	var doc regionSMTdata
	if err := xml.Unmarshal(body, &doc); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRegionData, err)
	}
	for i, s := range doc.Servers {
		e, err := s.entry()
		if err != nil {
			skipped = append(skipped, fmt.Errorf("%w %d (%q): %w", ErrInvalidEntry, i+1, s.Name, err))
			continue
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, skipped, fmt.Errorf("%w: %d entries, none usable", ErrRegionData, len(doc.Servers))
	}
	return entries, skipped, nil
}

// metadataAnswer is what a metadata_server returns instead of region data.
// cloudregister reads fingerprint, SMTserverIP and SMTserverName; the other
// keys are taken when present.
type metadataAnswer struct {
	Fingerprint string `json:"fingerprint"`
	IP          string `json:"SMTserverIP"`
	IPv6        string `json:"SMTserverIPv6"`
	Name        string `json:"SMTserverName"`
	Registry    string `json:"SMTregistryName"`
	Region      string `json:"region"`
}

// ParseMetadata reads a metadata server's JSON answer into the one entry it
// describes. SMTserverIP may hold either address family, since there is no
// separate key for IPv6 in what cloudregister reads. The error wraps
// ErrRegionData.
func ParseMetadata(body []byte) (Entry, error) {
	var m metadataAnswer
	if err := json.Unmarshal(body, &m); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrRegionData, err)
	}
	s := smtInfo{IPv4: m.IP, IPv6: m.IPv6, Name: m.Name, Registry: m.Registry, Fingerprint: m.Fingerprint, Region: m.Region}
	if a, err := netip.ParseAddr(strings.TrimSpace(m.IP)); err == nil && a.Is6() && absent(m.IPv6) {
		s.IPv4, s.IPv6 = "", m.IP
	}
	e, err := s.entry()
	if err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrRegionData, err)
	}
	return e, nil
}

// absent is how the region server spells a missing value: it prints Python's
// None for an unset address.
func absent(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == "None"
}

func (s smtInfo) entry() (Entry, error) {
	var problems []error
	e := Entry{Region: "unknown"}

	if absent(s.Name) {
		problems = append(problems, errors.New("no SMTserverName"))
	} else if name, err := hostname.Normalize(strings.TrimSpace(s.Name)); err != nil {
		problems = append(problems, fmt.Errorf("SMTserverName: %w", err))
	} else {
		e.Name = name
	}

	if absent(s.Fingerprint) {
		problems = append(problems, errors.New("no fingerprint"))
	} else if fp := strings.TrimSpace(s.Fingerprint); normalizeFingerprint(fp) == "" {
		problems = append(problems, fmt.Errorf("fingerprint %q is not a SHA-1 in hex", s.Fingerprint))
	} else {
		e.Fingerprint = fp
	}

	if !absent(s.IPv4) {
		a, err := netip.ParseAddr(strings.TrimSpace(s.IPv4))
		if err != nil || !a.Is4() || !usable(a) {
			problems = append(problems, fmt.Errorf("SMTserverIP %q is not a usable IPv4 address", s.IPv4))
		} else {
			e.IPv4 = a
		}
	}
	if !absent(s.IPv6) {
		a, err := netip.ParseAddr(strings.TrimSpace(s.IPv6))
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" || !usable(a) {
			problems = append(problems, fmt.Errorf("SMTserverIPv6 %q is not a usable IPv6 address", s.IPv6))
		} else {
			e.IPv6 = a
		}
	}
	if absent(s.IPv4) && absent(s.IPv6) {
		problems = append(problems, errors.New("no address"))
	}

	if !absent(s.Registry) {
		e.Registry = strings.TrimSpace(s.Registry)
	}
	if !absent(s.Region) {
		e.Region = strings.TrimSpace(s.Region)
	}
	if len(problems) > 0 {
		return Entry{}, failure.List(problems)
	}
	return e, nil
}

func usable(a netip.Addr) bool {
	return !a.IsUnspecified() && !a.IsMulticast()
}

// normalizeFingerprint turns a published fingerprint into the form
// Fingerprint returns (40 upper-case hex digits), or "" when it is not a
// SHA-1. cloudregister compares case-sensitively, which breaks on a
// lower-case fingerprint; we do not.
func normalizeFingerprint(fp string) string {
	fp = strings.ToUpper(strings.ReplaceAll(fp, ":", ""))
	if len(fp) != 2*sha1.Size {
		return ""
	}
	if _, err := hex.DecodeString(fp); err != nil {
		return ""
	}
	return fp
}

// Fingerprint is the SHA-1 of the DER in the first PEM block of pemBytes,
// as 40 upper-case hex digits without colons: what cloudregister compares
// with the region data's fingerprint. Only the first block counts, as for
// M2Crypto and for scc-operator, which both read only that one.
func Fingerprint(pemBytes []byte) (string, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return "", fmt.Errorf("smt: %w: no PEM block", ErrNoCertificate)
	}
	sum := sha1.Sum(block.Bytes)
	return strings.ToUpper(hex.EncodeToString(sum[:])), nil
}

// colonPairs writes a fingerprint of hex digits in the form the region
// servers publish, colon-separated pairs, so that the two sides of a
// mismatch read alike.
func colonPairs(hexDigits string) string {
	var b strings.Builder
	for i := 0; i < len(hexDigits); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(hexDigits[i:min(i+2, len(hexDigits))])
	}
	return b.String()
}

// verifyCert checks that body's first PEM block is a certificate whose
// SHA-1 is fingerprint, and returns that block alone, re-encoded: anything
// after it was not checked and must not reach the cluster's trust store.
func verifyCert(body []byte, fingerprint string) ([]byte, error) {
	block, _ := pem.Decode(body)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block in %d bytes", ErrNoCertificate, len(body))
	}
	got, err := Fingerprint(body)
	if err != nil {
		return nil, err
	}
	if want := normalizeFingerprint(fingerprint); got != want {
		return nil, fmt.Errorf("%w: certificate has %s, region data says %s", ErrFingerprint, colonPairs(got), fingerprint)
	}
	if block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: PEM block is %q", ErrNoCertificate, block.Type)
	}
	if _, err := x509.ParseCertificate(block.Bytes); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCertificate, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes}), nil
}
