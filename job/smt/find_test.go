package smt

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/regionconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFind(t *testing.T) {
	w := newWorld(t)
	v6 := fakecloud.HasIPv6Loopback()
	// Each refusal is what an admin reads in the run's log: its whole text
	// is compared with testdata/messages/TestFind.txt, written where the
	// loopback has IPv6 (A is dual stack there, which its messages show).
	// The certificates are made afresh each run, so their fingerprints'
	// digits read X (the form stays: the two sides of a mismatch read
	// alike).
	var msgs *testkit.Messages
	if v6 {
		msgs = testkit.NewMessages(t)
		msgs.Varying = true
	}

	type env struct {
		t *testing.T
		w *world
		s *regionconfig.Settings
		f *Finder
	}
	tests := map[string]struct {
		needIPv6 bool
		noHint   bool
		setup    func(e env)
		// want is the chosen server's name; "" expects an error wrapping
		// every one of wantErr.
		want       string
		wantErr    []error
		permanent  bool
		wantPauses []time.Duration
		check      func(t *testing.T, w *world, got UpdateServer)
		// checkErr asserts on the error beyond its sentinels.
		checkErr func(t *testing.T, err error)
	}{
		"normal flow: first region server, first update server": {
			want: nameA,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.Equal(t, netip.MustParseAddr(ipA), got.IPv4)
				if fakecloud.HasIPv6Loopback() {
					assert.Equal(t, netip.MustParseAddr(ip6A), got.IPv6)
				}
				assert.Equal(t, testRegion, got.Region)
				assert.Equal(t, "registry-"+nameA, got.Registry)
				assert.Equal(t, w.update[nameA].Fingerprint(), got.Fingerprint)
				assert.Equal(t, w.update[nameA].CertPEM, got.CertPEM)
				assert.Equal(t, []string{testRegion}, w.rs(region1).Hints())
				assert.Zero(t, w.rs(region2).Requests())
			},
		},
		"first region server drops the connection, second answers in the same pass": {
			setup: func(e env) { e.w.rs(region1).SetFaults(fakecloud.RegionFaults{Down: true}) },
			want:  nameB, // region2 lists B first, so the answer is visibly region2's
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region1).Requests())
				assert.Equal(t, 1, w.rs(region2).Requests())
				assert.Equal(t, []string{region1}, w.log.servers("region server failed"))
			},
		},
		"first region server not listening, second answers": {
			setup: func(e env) { e.s.RegionServers = []string{regionDead, region2} },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.dialsTo(regionDead))
				assert.Equal(t, 1, w.rs(region2).Requests())
			},
		},
		"slow region server times out, second answers": {
			setup: func(e env) {
				e.f.PassTimeouts = []time.Duration{300 * time.Millisecond}
				e.w.rs(region1).SetFaults(fakecloud.RegionFaults{Slow: time.Minute})
			},
			want: nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region2).Requests())
			},
		},
		"success only on the third pass is a success": {
			setup: func(e env) {
				e.w.rs(region1).SetFaults(fakecloud.RegionFaults{FailFirst: 2})
				e.w.rs(region2).SetFaults(fakecloud.RegionFaults{FailFirst: 2})
			},
			want:       nameA,
			wantPauses: []time.Duration{20 * time.Second, 10 * time.Second},
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 3, w.rs(region1).Requests())
				assert.Equal(t, 2, w.rs(region2).Requests())
			},
		},
		"no region server answers in any pass: transient": {
			setup: func(e env) {
				e.w.rs(region1).SetFaults(fakecloud.RegionFaults{Status: http.StatusInternalServerError})
				e.w.rs(region2).SetFaults(fakecloud.RegionFaults{Status: http.StatusNotFound})
			},
			wantErr:    []error{ErrNoRegionServer},
			wantPauses: []time.Duration{20 * time.Second, 10 * time.Second},
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 3, w.rs(region1).Requests())
				assert.Equal(t, 3, w.rs(region2).Requests())
			},
		},
		"pinned certificate missing: server skipped with a warning": {
			setup: func(e env) { require.NoError(e.t, os.Remove(filepath.Join(e.w.certDir, region1+".pem"))) },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.dialsTo(region1))
				assert.Equal(t, 1, w.rs(region2).Requests())
				assert.Equal(t, []string{region1}, w.log.servers("region server skipped"))
			},
		},
		"pinned certificate is another one: TLS refused, next server": {
			setup: func(e env) {
				_, other, err := fakecloud.SelfSigned(region1)
				require.NoError(e.t, err)
				require.NoError(e.t, os.WriteFile(filepath.Join(e.w.certDir, region1+".pem"), other, 0o644))
			},
			want: nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.rs(region1).Requests(), "no request may reach a server whose certificate is not the pinned one")
				assert.Equal(t, 1, w.rs(region2).Requests())
			},
		},
		"pinned certificate names another IP: TLS refused, next server": {
			setup: func(e env) {
				// region2's genuine certificate, pinned for region1: the
				// chain is trusted but the IP does not match.
				require.NoError(e.t, os.WriteFile(filepath.Join(e.w.certDir, region1+".pem"), e.w.pinned[region2+".pem"], 0o644))
			},
			want: nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.rs(region1).Requests())
			},
		},
		"no pinned certificate at all: permanent": {
			setup: func(e env) {
				require.NoError(e.t, os.Remove(filepath.Join(e.w.certDir, region1+".pem")))
				require.NoError(e.t, os.WriteFile(filepath.Join(e.w.certDir, region2+".pem"), []byte("not a certificate"), 0o644))
			},
			wantErr:   []error{ErrNoRegionServer, ErrPinnedCert},
			permanent: true,
		},
		"metadata server replaces the region servers": {
			setup: func(e env) {
				u := e.w.update[nameC]
				srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
					_ = json.NewEncoder(rw).Encode(map[string]string{"fingerprint": u.Fingerprint(), "SMTserverIP": ipC, "SMTserverName": u.Name})
				}))
				e.t.Cleanup(srv.Close)
				e.s.MetadataServer = srv.URL + "/smtinfo"
				e.f.MetadataRoots = x509.NewCertPool()
				e.f.MetadataRoots.AddCert(srv.Certificate())
			},
			want: nameC,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.Zero(t, w.rs(region1).Requests())
				assert.Zero(t, w.rs(region2).Requests())
				assert.Equal(t, "unknown", got.Region)
				assert.Equal(t, w.update[nameC].CertPEM, got.CertPEM)
			},
		},
		"metadata server redirect is not followed": {
			setup: func(e env) {
				u := e.w.update[nameC]
				var followed atomic.Bool
				srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/elsewhere" {
						followed.Store(true)
						_ = json.NewEncoder(rw).Encode(map[string]string{"fingerprint": u.Fingerprint(), "SMTserverIP": ipC, "SMTserverName": u.Name})
						return
					}
					http.Redirect(rw, r, "/elsewhere", http.StatusFound)
				}))
				e.t.Cleanup(srv.Close)
				e.t.Cleanup(func() { assert.False(e.t, followed.Load(), "the redirect was followed") })
				e.s.MetadataServer = srv.URL + "/smtinfo"
				e.f.MetadataRoots = x509.NewCertPool()
				e.f.MetadataRoots.AddCert(srv.Certificate())
				e.f.PassTimeouts = e.f.PassTimeouts[:1]
			},
			wantErr: []error{ErrNoRegionServer},
			checkErr: func(t *testing.T, err error) {
				var status *StatusError
				require.ErrorAs(t, err, &status)
				assert.Equal(t, http.StatusFound, status.Code, "the redirect itself is the answer")
			},
		},
		"metadata server with a certificate the roots do not trust": {
			setup: func(e env) {
				srv := httptest.NewTLSServer(http.NotFoundHandler())
				e.t.Cleanup(srv.Close)
				e.s.MetadataServer = srv.URL + "/smtinfo"
				e.f.PassTimeouts = e.f.PassTimeouts[:1]
			},
			wantErr: []error{ErrNoRegionServer},
			checkErr: func(t *testing.T, err error) {
				var unknown x509.UnknownAuthorityError
				assert.ErrorAs(t, err, &unknown, "the TLS handshake refused the certificate")
			},
		},
		"entries with None or invalid addresses are skipped": {
			setup: func(e env) {
				a, b := e.w.update[nameA].Info("None", "", testRegion), e.w.update[nameB].Info("300.0.0.1", "", testRegion)
				e.w.rs(region1).SetEntries(a, b, e.w.update[nameC].Info(ipC, "None", testRegion))
			},
			want: nameC,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.False(t, got.IPv6.IsValid())
				assert.Equal(t, []string{region1, region1}, w.log.servers("update server entry skipped"))
			},
		},
		"region server prints None for every address: next region server": {
			setup: func(e env) { e.w.rs(region1).SetFaults(fakecloud.RegionFaults{NoneIPs: true}) },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region2).Requests())
			},
		},
		"garbage XML: next region server": {
			setup: func(e env) { e.w.rs(region1).SetFaults(fakecloud.RegionFaults{GarbageXML: true}) },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region2).Requests())
			},
		},
		"no usable entry anywhere: error names the region servers": {
			setup: func(e env) {
				e.f.PassTimeouts = e.f.PassTimeouts[:1]
				e.w.rs(region1).SetFaults(fakecloud.RegionFaults{NoneIPs: true})
				e.w.rs(region2).SetFaults(fakecloud.RegionFaults{GarbageXML: true})
			},
			wantErr: []error{ErrNoRegionServer, ErrRegionData, ErrInvalidEntry},
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, []string{region1, region2}, w.log.servers("region server failed"))
			},
		},
		"IPv6-only update server": {
			needIPv6: true,
			setup: func(e env) {
				e.w.rs(region1).SetEntries(e.w.update[nameA].Info("", ip6A, testRegion))
			},
			want: nameA,
			check: func(t *testing.T, _ *world, got UpdateServer) {
				assert.False(t, got.IPv4.IsValid())
				assert.Equal(t, netip.MustParseAddr(ip6A), got.IPv6)
				assert.Equal(t, netip.MustParseAddr(ip6A), got.Reached, "one address, nothing to race: it is the one that answered")
			},
		},
		"update server's IPv6 is a black hole: its IPv4 answers": {
			setup: func(e env) {
				e.w.rs(region1).SetEntries(e.w.update[nameA].Info(ipA, "2001:db8::11", testRegion))
				e.w.blackHole("2001:db8::11")
			},
			want: nameA,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.dialsTo("2001:db8::11"), "the certificate is fetched from the address that answered")
			},
		},
		"update server's IPv6 is a black hole: IPv4 is raced while IPv6 still hangs": {
			setup: func(e env) {
				// A health timeout far longer than the family delay: trying
				// IPv4 only after IPv6 gave up would show as no IPv4 dial
				// during the hang.
				e.f.HealthTimeout = 20 * time.Second
				e.f.FamilyDelay = 10 * time.Millisecond
				e.w.rs(region1).SetEntries(e.w.update[nameA].Info(ipA, "2001:db8::11", testRegion))
				e.w.blackHole("2001:db8::11")
			},
			want: nameA,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.Equal(t, 1, w.dialsTo("2001:db8::11"), "IPv6 is tried once, in the race")
				assert.Positive(t, w.dialsWhileHoleHung(ipA), "IPv4 started while the IPv6 connect still hung")
				assert.Equal(t, netip.MustParseAddr("2001:db8::11"), got.IPv6, "the IPv6 address is still handed to phase 5")
				assert.Equal(t, netip.MustParseAddr(ipA), got.Reached, "phase 5 is told IPv4 won, so it need not race again")
			},
		},
		"name under the cluster domain: refused unasked, sibling chosen": {
			setup: func(e env) {
				e.w.rs(region1).SetEntries(e.w.named(nameA, "kubernetes.default.svc.cluster.local"), e.w.infos()[1])
			},
			want: nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.dialsTo(ipA), "nothing is sent to a refused entry")
				assert.Equal(t, []string{"kubernetes.default.svc.cluster.local"}, w.log.servers("update server refused"))
			},
		},
		"name outside the allowed domains: refused, sibling chosen": {
			setup: func(e env) { e.w.rs(region1).SetEntries(e.w.named(nameA, "login.microsoftonline.com"), e.w.infos()[1]) },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.dialsTo(ipA))
			},
		},
		"single-label or underscore name: entry skipped, sibling chosen": {
			setup: func(e env) {
				e.w.rs(region1).SetEntries(e.w.named(nameA, "susecloud"), e.w.named(nameA, "smt_a.susecloud.test"), e.w.infos()[2])
			},
			want: nameC,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.dialsTo(ipA))
				assert.Equal(t, []string{region1, region1}, w.log.servers("update server entry skipped"))
			},
		},
		"every entry refused: the error names each entry and its rule": {
			setup: func(e env) {
				e.f.AllowLoopback = false
				linkLocal, linkLocal6 := e.w.update[nameA].Info("169.254.169.254", "", testRegion), e.w.update[nameB].Info("", "fe80::1", testRegion)
				e.w.rs(region1).SetEntries(linkLocal, linkLocal6, e.w.update[nameC].Info(ipC, "", testRegion))
			},
			wantErr: []error{ErrNoUpdateServer, ErrRefused},
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.dialsTo(ipC)+w.dialsTo("169.254.169.254")+w.dialsTo("fe80::1"), "nothing is sent to a refused address")
			},
		},
		"domains are configurable, the cluster domain is not": {
			setup: func(e env) {
				e.f.Domains = []string{"cluster.local", "susecloud.test"}
				e.w.rs(region1).SetEntries(e.w.named(nameA, "smt.cluster.local"), e.w.infos()[2])
			},
			want: nameC,
		},
		"old SMT without health API: alive through its certificate": {
			setup: func(e env) { e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{Health404: true}) },
			want:  nameA,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.Equal(t, w.update[nameA].CertPEM, got.CertPEM)
				assert.Equal(t, 1, w.update[nameA].Requests("/smt.crt"), "the certificate that proved it alive is not fetched twice")
			},
		},
		"RMT without smt.crt: rmt.crt is used": {
			setup: func(e env) { e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{OnlyRMTCrt: true}) },
			want:  nameA,
		},
		"offline update server: sibling chosen": {
			setup: func(e env) { e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{Offline: true}) },
			want:  nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Zero(t, w.update[nameA].Requests("/smt.crt"))
				assert.Equal(t, []string{nameA}, w.log.servers("update server rejected"))
			},
		},
		"wrong fingerprint: sibling chosen, the bad certificate is not returned": {
			setup: func(e env) { e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{WrongCert: true}) },
			want:  nameB,
			check: func(t *testing.T, w *world, got UpdateServer) {
				assert.Equal(t, w.update[nameB].CertPEM, got.CertPEM)
				assert.Equal(t, []string{nameA}, w.log.servers("update server rejected"))
			},
		},
		"siblings before other regions": {
			setup: func(e env) {
				e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{WrongCert: true})
				e.w.rs(region1).SetEntries(
					e.w.update[nameA].Info(ipA, "", testRegion),
					e.w.update[nameB].Info(ipB, "", "northeurope"),
					e.w.update[nameC].Info(ipC, "", testRegion),
				)
			},
			want: nameC,
		},
		"all siblings bad: one error with every server and its reason": {
			setup: func(e env) {
				e.w.update[nameA].SetFaults(fakecloud.UpdateFaults{WrongCert: true})
				e.w.update[nameB].SetFaults(fakecloud.UpdateFaults{Offline: true})
				e.w.update[nameC].SetFaults(fakecloud.UpdateFaults{Status5xx: true})
			},
			wantErr: []error{ErrNoUpdateServer, ErrFingerprint, ErrNotResponsive},
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, []string{nameA, nameB, nameC}, w.log.servers("update server rejected"))
			},
		},
		"httpsOnly: certificate over https": {
			setup: func(e env) {
				e.s.HTTPSOnly = true
				e.f.HTTPPort = closedPort(e.t)
			},
			want: nameA,
		},
		"not httpsOnly: certificate over plain http": {
			setup:   func(e env) { e.f.HTTPPort = closedPort(e.t) },
			wantErr: []error{ErrNoUpdateServer, ErrNoCertificate},
		},
		"IPv6 region servers dropped when the probe finds no IPv6 access": {
			setup: func(e env) {
				require.NoError(e.t, os.WriteFile(filepath.Join(e.w.certDir, "2001:db8::5.pem"), e.w.pinned[region1+".pem"], 0o644))
				e.s.RegionServers = []string{"2001:db8::5", region1}
				e.w.blackHole("2001:db8::5")
			},
			want: nameA,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.dialsTo("2001:db8::5"), "only the probe")
				assert.Equal(t, 1, w.rs(region1).Requests())
			},
		},
		"IPv6 region server asked first when reachable": {
			needIPv6: true,
			setup:    func(e env) { e.s.RegionServers = []string{region1, region6} },
			want:     nameA,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region6).Requests())
				assert.Zero(t, w.rs(region1).Requests())
			},
		},
		"host name entries come last": {
			setup: func(e env) {
				e.s.RegionServers = []string{"localhost", region2}
				require.NoError(e.t, os.WriteFile(filepath.Join(e.w.certDir, "localhost.pem"), e.w.pinned[region1+".pem"], 0o644))
				e.w.blackHole("localhost")
			},
			want: nameB,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, 1, w.rs(region2).Requests())
				assert.Zero(t, w.dialsTo("localhost"))
			},
		},
		"no hint: the region server decides by the caller's address": {
			noHint: true,
			want:   nameA,
			check: func(t *testing.T, w *world, _ UpdateServer) {
				assert.Equal(t, []string{""}, w.rs(region1).Hints())
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.needIPv6 && !v6 {
				t.Skip("no IPv6 loopback")
			}
			w.reset(t)
			// region2 lists B first, so which region server answered is
			// visible in the result.
			w.rs(region2).SetEntries(w.infos()[1], w.infos()[0], w.infos()[2])
			s, f := w.settings(), w.finder()
			if tc.setup != nil {
				tc.setup(env{t: t, w: w, s: &s, f: f})
			}
			hint := testRegion
			if tc.noHint {
				hint = ""
			}

			got, err := f.Find(t.Context(), s, hint)

			if tc.want == "" {
				require.Error(t, err)
				for _, want := range tc.wantErr {
					assert.ErrorIs(t, err, want)
				}
				assert.Equal(t, tc.permanent, failure.IsPermanent(err))
				if msgs != nil {
					msgs.Add(name, errors.New(fingerprints.ReplaceAllStringFunc(err.Error(), hideHex)), w.certDir, "<certdir>")
				}
				if tc.checkErr != nil {
					tc.checkErr(t, err)
				}
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got.Name)
				fp, err := Fingerprint(got.CertPEM)
				require.NoError(t, err)
				assert.Equal(t, normalizeFingerprint(got.Fingerprint), fp, "the returned certificate matches the returned fingerprint")
			}
			assert.Equal(t, tc.wantPauses, w.pauses.All())
			if tc.check != nil {
				tc.check(t, w, got)
			}
		})
	}
}

// fingerprints are SHA-1 fingerprints in hex, with or without colons.
var fingerprints = regexp.MustCompile(`\b[0-9A-F]{2}(:?[0-9A-F]{2}){19}\b`)

// hideHex writes each hex digit of a fingerprint as X.
func hideHex(fp string) string {
	return strings.Map(func(r rune) rune {
		if r == ':' {
			return r
		}
		return 'X'
	}, fp)
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ls, port, err := fakecloud.ListenSamePort("127.0.0.1", ipA, ipB, ipC)
	require.NoError(t, err)
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return port
}

func TestFindCancelled(t *testing.T) {
	w := newWorld(t)
	w.reset(t)
	w.rs(region1).SetFaults(fakecloud.RegionFaults{FailFirst: 99})
	w.rs(region2).SetFaults(fakecloud.RegionFaults{FailFirst: 99})
	ctx, cancel := context.WithCancel(t.Context())
	f := w.finder()
	f.Sleep = func(ctx context.Context, _ time.Duration) error {
		cancel() // the job is told to stop while waiting for the next pass
		<-ctx.Done()
		return ctx.Err()
	}

	_, err := f.Find(ctx, w.settings(), testRegion)

	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, w.rs(region1).Requests(), "no second pass after cancellation")
}

func TestFindBodyLimit(t *testing.T) {
	w := newWorld(t)
	tests := map[string]struct {
		setup   func(w *world)
		wantErr []error
	}{
		"endless region server answer": {
			setup: func(w *world) {
				w.rs(region1).SetFaults(fakecloud.RegionFaults{EndlessBody: true})
				w.rs(region2).SetFaults(fakecloud.RegionFaults{EndlessBody: true})
			},
			wantErr: []error{ErrNoRegionServer, ErrBodyTooLarge},
		},
		"endless update server answers": {
			setup: func(w *world) {
				for _, u := range w.update {
					u.SetFaults(fakecloud.UpdateFaults{EndlessBody: true})
				}
			},
			wantErr: []error{ErrNoUpdateServer, ErrBodyTooLarge},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w.reset(t)
			tc.setup(w)
			f := w.finder()
			f.PassTimeouts = f.PassTimeouts[:1]
			f.MaxBody = 64 << 10

			began := time.Now()
			_, err := f.Find(t.Context(), w.settings(), testRegion)

			require.Error(t, err)
			for _, want := range tc.wantErr {
				assert.ErrorIs(t, err, want)
			}
			assert.Less(t, time.Since(began), 3*time.Second, "a body is cut off at the limit, not read until the timeout")
		})
	}
}

func TestRegionURL(t *testing.T) {
	tests := map[string]struct {
		entry, hint string
		port        int
		want        string
	}{
		"IPv4, default port":         {entry: "52.187.53.250", hint: "westus3", port: 443, want: "https://52.187.53.250/regionInfo?regionHint=westus3"},
		"IPv6 in brackets":           {entry: "2603:1030:603::2e9", hint: "westus3", port: 443, want: "https://[2603:1030:603::2e9]/regionInfo?regionHint=westus3"},
		"host name":                  {entry: "smt.example.test", hint: "westus3", port: 443, want: "https://smt.example.test/regionInfo?regionHint=westus3"},
		"no hint, no query":          {entry: "52.187.53.250", port: 443, want: "https://52.187.53.250/regionInfo"},
		"other port":                 {entry: "127.0.0.2", hint: "eastus", port: 8443, want: "https://127.0.0.2:8443/regionInfo?regionHint=eastus"},
		"IPv6, other port":           {entry: "::1", port: 8443, want: "https://[::1]:8443/regionInfo"},
		"hint is escaped, not split": {entry: "127.0.0.2", hint: "a&b=c", port: 443, want: "https://127.0.0.2/regionInfo?regionHint=a%26b%3Dc"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := &Finder{Config: Config{RegionPort: tc.port}}
			assert.Equal(t, tc.want, f.regionURL(tc.entry, "regionInfo", tc.hint))
		})
	}
}

func TestRegionOrder(t *testing.T) {
	ls, port, err := fakecloud.ListenSamePort("127.0.0.1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ls[0].Close() })
	reverse := func(n int, swap func(i, j int)) {
		for i := 0; i < n/2; i++ {
			swap(i, n-1-i)
		}
	}
	entries := []string{"name-a.test", "127.0.0.2", "2001:db8::1", "127.0.0.3", "name-b.test", "2001:db8::2"}

	tests := map[string]struct {
		v6Reachable bool
		want        []string
	}{
		"IPv6 reachable: IPv6, IPv4, names, each bucket shuffled": {
			v6Reachable: true,
			want:        []string{"2001:db8::2", "2001:db8::1", "127.0.0.3", "127.0.0.2", "name-b.test", "name-a.test"},
		},
		"IPv6 unreachable: dropped": {
			want: []string{"127.0.0.3", "127.0.0.2", "name-b.test", "name-a.test"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := (&Finder{Config: Config{RegionPort: port}, ProbeTimeout: 200 * time.Millisecond, Shuffle: reverse}).withDefaults()
			require.NoError(t, err)
			f.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				// The documentation prefix is never dialled: reachable
				// means "connect to our listener instead", unreachable
				// means "hang until the probe gives up".
				if tc.v6Reachable {
					var d net.Dialer
					return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}
			assert.Equal(t, tc.want, f.regionOrder(t.Context(), slices.Clone(entries)))
		})
	}
}
