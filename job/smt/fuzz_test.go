package smt

import (
	"testing"

	"github.com/rancher/registration-engine/job/hostname"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/.

func FuzzParseRegionData(f *testing.F) {
	f.Add([]byte(realAnswer))
	f.Add([]byte(`<regionSMTdata><smtInfo SMTserverIP="None" SMTserverIPv6="2001:db8::1" SMTserverName="a.example" fingerprint="` + fpLower + `"/></regionSMTdata>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		entries, skipped, err := ParseRegionData(body)
		if (err == nil) != (len(entries) > 0) {
			t.Fatalf("err %v with %d entries", err, len(entries))
		}
		for _, e := range entries {
			checkEntry(t, e)
		}
		for _, s := range skipped {
			if s == nil {
				t.Fatal("nil problem")
			}
		}
	})
}

func FuzzParseMetadata(f *testing.F) {
	f.Add([]byte(`{"fingerprint":"` + fpColon + `","SMTserverIP":"192.0.2.1","SMTserverName":"a.example"}`))
	f.Add([]byte(`{"fingerprint":"` + fpLower + `","SMTserverIP":"2001:db8::1","SMTserverName":"a.example"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := ParseMetadata(body)
		if err != nil {
			return
		}
		checkEntry(t, e)
	})
}

// checkEntry holds the promises Entry's documentation makes to Find's
// callers: a usable name, a real SHA-1 fingerprint, at least one address,
// each of its own family.
func checkEntry(t *testing.T, e Entry) {
	t.Helper()
	if n, err := hostname.Normalize(e.Name); err != nil || n != e.Name {
		t.Fatalf("name %q: %v", e.Name, err)
	}
	if normalizeFingerprint(e.Fingerprint) == "" {
		t.Fatalf("fingerprint %q", e.Fingerprint)
	}
	if !e.IPv4.IsValid() && !e.IPv6.IsValid() {
		t.Fatal("no address")
	}
	if e.IPv4.IsValid() && !e.IPv4.Is4() {
		t.Fatalf("IPv4 %s", e.IPv4)
	}
	if e.IPv6.IsValid() && (!e.IPv6.Is6() || e.IPv6.Is4In6() || e.IPv6.Zone() != "") {
		t.Fatalf("IPv6 %s", e.IPv6)
	}
	if e.Region == "" {
		t.Fatal("empty region")
	}
}
