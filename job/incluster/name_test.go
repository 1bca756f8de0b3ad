package incluster

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rancher/registration-engine/internal/testkit"
	"github.com/rancher/registration-engine/job/incluster/coredns"
	"github.com/rancher/registration-engine/job/incluster/handover"
	"github.com/rancher/registration-engine/job/kube"
)

type mapper struct {
	edit  coredns.Edit
	err   error
	calls int
}

func (m *mapper) Ensure(context.Context, string, netip.Addr) (coredns.Edit, error) {
	m.calls++
	return m.edit, m.err
}

type waiter struct {
	object string
	err    error
	calls  int
}

func (w *waiter) Until(_ context.Context, _ string, _ netip.Addr, _ []byte, object string) (time.Duration, error) {
	w.calls++
	w.object = object
	return 3 * time.Second, w.err
}

var addr = netip.MustParseAddr("2001:db8::10")

// TestPublish: one call maps the name, waits for it with the ConfigMap the
// mapping reported, and returns what it did, or why it did less.
func TestPublish(t *testing.T) {
	edit := coredns.Edit{Object: "kube-system/coredns-custom", Changed: true}
	mapErr := errors.New("conflict")
	waitErr := errors.New("not yet")
	tests := map[string]struct {
		cfg       Config
		mapErr    error
		waitErr   error
		want      Result
		wantErr   bool // the message, with its phase's prefix, is in the golden file
		wantMaps  int
		wantWaits int
	}{
		"mapped and handed over": {
			cfg:  Config{Map: true, Timeout: time.Minute},
			want: Result{Object: edit.Object, Changed: true, Waited: 3 * time.Second}, wantMaps: 1, wantWaits: 1,
		},
		"IN_CLUSTER_DNS=false: nothing mapped, nothing waited for": {
			cfg:  Config{Map: false, Timeout: time.Minute},
			want: Result{Skipped: skipNoMap},
		},
		"outside a pod: mapped, not waited for": {
			cfg:  Config{Map: true, OutsidePod: true, Timeout: time.Minute},
			want: Result{Object: edit.Object, Changed: true, Skipped: skipOutsidePod}, wantMaps: 1,
		},
		"outside a pod with a DNS server to ask: waited for": {
			cfg:  Config{Map: true, OutsidePod: true, DNSServer: "127.0.0.1:53", Timeout: time.Minute},
			want: Result{Object: edit.Object, Changed: true, Waited: 3 * time.Second}, wantMaps: 1, wantWaits: 1,
		},
		"HANDOVER_TIMEOUT=0: mapped, the wait turned off": {
			cfg:  Config{Map: true},
			want: Result{Object: edit.Object, Changed: true, Skipped: skipNoWait}, wantMaps: 1,
		},
		"the mapping fails: no wait": {
			cfg: Config{Map: true, Timeout: time.Minute}, mapErr: mapErr,
			wantErr: true, wantMaps: 1,
		},
		"the wait fails": {
			cfg: Config{Map: true, Timeout: time.Minute}, waitErr: waitErr,
			want:    Result{Object: edit.Object, Changed: true, Waited: 3 * time.Second},
			wantErr: true, wantMaps: 1, wantWaits: 1,
		},
	}
	msgs := testkit.NewMessages(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := &mapper{edit: edit, err: tc.mapErr}
			w := &waiter{err: tc.waitErr}
			if tc.mapErr != nil {
				m.edit = coredns.Edit{}
			}
			got, err := (&Name{Config: tc.cfg, CoreDNS: m, Wait: w}).Publish(context.Background(), "smt-azure.example", addr, []byte("PEM"))
			if tc.wantErr {
				require.Error(t, err)
				msgs.Add(name, err)
			} else {
				require.NoError(t, err)
			}
			if tc.mapErr == nil {
				assert.Equal(t, tc.want, got)
			}
			assert.Equal(t, tc.wantMaps, m.calls, "CoreDNS edits")
			assert.Equal(t, tc.wantWaits, w.calls, "handover waits")
			if w.calls > 0 {
				assert.Equal(t, edit.Object, w.object, "the wait names the ConfigMap this call edited")
			}
		})
	}
}

// A settle as long as the timeout would fail every run after CoreDNS was
// edited: refused at load; no rule when the wait does not apply.
func TestConfigValidate(t *testing.T) {
	assert.NoError(t, Config{Map: true, Timeout: time.Minute, Settle: 20 * time.Second}.Validate())
	assert.NoError(t, Config{Map: true, Timeout: 0, Settle: time.Hour}.Validate(), "no wait, no rule")
	assert.NoError(t, Config{Map: false, Timeout: time.Second, Settle: time.Minute}.Validate(), "no mapping, no wait")
	err := Config{Map: true, Timeout: time.Minute, Settle: time.Minute}.Validate()
	require.Error(t, err)
	msgs := testkit.NewMessages(t)
	msgs.Add("settle as long as the timeout", err)
}

// The hosts block's TTL is chosen to expire within the handover's settle
// time (coredns.HostsTTL's comment): a cache that took the old
// address before the last replica reloaded has let it go by the handover.
func TestHostsTTLExpiresWithinTheSettle(t *testing.T) {
	assert.LessOrEqual(t, time.Duration(coredns.HostsTTL)*time.Second, handover.DefaultSettle)
}

// The engine's earlier entries the mapping removed (update servers no
// longer chosen) reach phase 6's log line and the Result; and the
// production Name hands UPDATE_SERVER_DOMAINS to CoreDNS, which tells them
// from a person's entries by it.
func TestPublishReportsRemovedEntries(t *testing.T) {
	m := &mapper{edit: coredns.Edit{Object: "kube-system/coredns", Changed: true, Removed: []string{"20.38.0.1 smt-azure-old.susecloud.net"}}}

	got, err := (&Name{Config: Config{Map: true, Timeout: time.Minute}, CoreDNS: m, Wait: &waiter{}}).Publish(context.Background(), "smt-azure.susecloud.net", addr, []byte("PEM"))

	require.NoError(t, err)
	assert.Equal(t, []string{"20.38.0.1 smt-azure-old.susecloud.net"}, got.Removed)
	assert.Contains(t, got.Attrs(), slog.Any("dnsRemoved", []string{"20.38.0.1 smt-azure-old.susecloud.net"}))
	for _, a := range (Result{Object: "kube-system/coredns"}).Attrs() {
		assert.NotEqual(t, "dnsRemoved", a.(slog.Attr).Key, "no attribute when nothing was removed")
	}

	domains := []string{"susecloud.net", "example.com"}
	ranges := []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
	n := New(Config{Map: true, Domains: domains, ClusterRanges: ranges}, &kube.Clients{}, nil)
	require.IsType(t, &coredns.Editor{}, n.CoreDNS)
	assert.Equal(t, domains, n.CoreDNS.(*coredns.Editor).Domains)
	assert.Equal(t, ranges, n.CoreDNS.(*coredns.Editor).ClusterRanges, "CLUSTER_ADDRESS_RANGES reaches the CoreDNS check")
}
