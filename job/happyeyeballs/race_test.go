package happyeyeballs

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rancher/registration-engine/e2e/fakecloud"
	"github.com/rancher/registration-engine/internal/failure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	v4Open   = netip.MustParseAddr("127.0.0.2")
	v4Closed = netip.MustParseAddr("127.0.0.3")
	v6Loop   = netip.MustParseAddr("::1")
	// v6Hole stands for an advertised IPv6 address the node cannot route.
	// It is never dialled: blackHole intercepts it.
	v6Hole = netip.MustParseAddr("2001:db8::2e9")
)

// listen opens the shared port on 127.0.0.2 and, when the machine has it,
// [::1], accepting and dropping every connection. 127.0.0.3 stays closed.
func listen(t testing.TB) int {
	t.Helper()
	ls, port, err := fakecloud.ListenSamePort(v4Open.String(), v6Loop.String())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				_ = c.Close()
			}
		})
	}
	t.Cleanup(func() {
		for _, l := range ls {
			_ = l.Close()
		}
		wg.Wait()
	})
	return port
}

// dialer wraps a real net.Dialer: addresses in hole block until the attempt
// is cancelled (an unroutable address, without sending a packet anywhere);
// without IPv6 loopback, [::1] is connected through 127.0.0.2 so the test
// still has a working "IPv6" peer. Every connection handed out is recorded.
type dialer struct {
	hole map[string]bool
	// lateConnect makes a blocked hole attempt connect to 127.0.0.2 after
	// cancellation and return that connection anyway, like a Dial that
	// ignores its context at the last moment.
	lateConnect bool

	mu    sync.Mutex
	conns []*trackedConn
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if d.hole[host] {
		<-ctx.Done()
		if !d.lateConnect {
			return nil, &net.OpError{Op: "dial", Net: network, Err: ctx.Err(), Addr: tcpAddr(addr)}
		}
		host = v4Open.String()
		ctx = context.Background()
	}
	if host == v6Loop.String() && !fakecloud.HasIPv6Loopback() {
		host = v4Open.String()
	}
	var nd net.Dialer
	c, err := nd.DialContext(ctx, network, net.JoinHostPort(host, port))
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c}
	d.mu.Lock()
	d.conns = append(d.conns, tc)
	d.mu.Unlock()
	return tc, nil
}

func (d *dialer) allClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		if !c.isClosed() {
			return false
		}
	}
	return true
}

type trackedConn struct {
	net.Conn
	mu     sync.Mutex
	closed bool
}

func (c *trackedConn) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	return c.Conn.Close()
}

func (c *trackedConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func tcpAddr(addr string) net.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}

func TestRace(t *testing.T) {
	port := listen(t)
	const delay = 100 * time.Millisecond
	const attempt = 2 * time.Second

	tests := map[string]struct {
		v6, v4      netip.Addr
		hole        []netip.Addr
		lateConnect bool
		// v6Refused points the IPv6 attempt at a port that refuses.
		v6Refused bool
		delay     time.Duration
		want      netip.Addr
		// minElapsed/maxElapsed bound how long the race took.
		minElapsed, maxElapsed time.Duration
	}{
		"both reachable: IPv6 wins at once": {
			v6: v6Loop, v4: v4Open, want: v6Loop, maxElapsed: delay,
		},
		"IPv6 black hole: IPv4 wins after the delay": {
			v6: v6Hole, v4: v4Open, hole: []netip.Addr{v6Hole}, want: v4Open,
			minElapsed: delay, maxElapsed: attempt,
		},
		"IPv6 black hole that connects late: IPv4 wins, the late connection is closed": {
			v6: v6Hole, v4: v4Open, hole: []netip.Addr{v6Hole}, lateConnect: true, want: v4Open,
			minElapsed: delay, maxElapsed: attempt,
		},
		"IPv4 closed: IPv6 wins": {
			v6: v6Loop, v4: v4Closed, want: v6Loop, maxElapsed: delay,
		},
		"IPv6 refused: IPv4 starts at once instead of after the delay": {
			v6: v6Loop, v4: v4Open, v6Refused: true, delay: time.Hour, want: v4Open, maxElapsed: attempt,
		},
		"only IPv4": {
			v4: v4Open, want: v4Open, maxElapsed: delay,
		},
		"only IPv6": {
			v6: v6Loop, want: v6Loop, maxElapsed: delay,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &dialer{hole: map[string]bool{}, lateConnect: tc.lateConnect}
			for _, h := range tc.hole {
				d.hole[h.String()] = true
			}
			r := &Racer{Port: port, Delay: delay, AttemptTimeout: attempt, Dial: d.dial}
			if tc.delay != 0 {
				r.Delay = tc.delay
			}
			if tc.v6Refused {
				closed := listenClosedV6(t)
				r.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if ap := netip.MustParseAddrPort(addr); ap.Addr() == v6Loop {
						addr = closed
					}
					return d.dial(ctx, network, addr)
				}
			}

			before := goleak.IgnoreCurrent()
			began := time.Now()
			got, err := r.Race(t.Context(), tc.v6, tc.v4)
			elapsed := time.Since(began)
			goleak.VerifyNone(t, before)

			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.GreaterOrEqual(t, elapsed, tc.minElapsed)
			assert.Less(t, elapsed, tc.maxElapsed)
			assert.True(t, d.allClosed(), "every connection Race opened is closed when it returns")
		})
	}
}

// listenClosedV6 returns an address on [::1] (or 127.0.0.1 without IPv6)
// that refuses connections.
func listenClosedV6(t *testing.T) string {
	t.Helper()
	host := "::1"
	if !fakecloud.HasIPv6Loopback() {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestRaceFails(t *testing.T) {
	port := listen(t)
	hole := map[string]bool{v6Hole.String(): true}

	tests := map[string]struct {
		v6, v4 netip.Addr
		cancel bool
		// wantAddrs are the addresses the error must name.
		wantAddrs []string
		wantIs    error
		permanent bool
	}{
		"both fail: transient, names both": {
			v6: v6Hole, v4: v4Closed, wantIs: ErrUnreachable,
			wantAddrs: []string{"[2001:db8::2e9]:" + strconv.Itoa(port), "127.0.0.3:" + strconv.Itoa(port)},
		},
		"only IPv4, closed": {
			v4: v4Closed, wantIs: ErrUnreachable, wantAddrs: []string{"127.0.0.3:" + strconv.Itoa(port)},
		},
		"no address at all: permanent": {
			wantIs: ErrNoAddress, permanent: true,
		},
		"cancelled while both hang": {
			v6: v6Hole, v4: netip.MustParseAddr("192.0.2.1"), cancel: true, wantIs: context.Canceled,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d := &dialer{hole: hole}
			if tc.cancel {
				d.hole = map[string]bool{tc.v6.String(): true, tc.v4.String(): true}
			}
			r := &Racer{Port: port, Delay: 20 * time.Millisecond, AttemptTimeout: 300 * time.Millisecond, Dial: d.dial}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.cancel {
				r.AttemptTimeout = time.Hour
				time.AfterFunc(50*time.Millisecond, cancel)
			}

			before := goleak.IgnoreCurrent()
			began := time.Now()
			got, err := r.Race(ctx, tc.v6, tc.v4)
			goleak.VerifyNone(t, before)

			require.Error(t, err)
			assert.Less(t, time.Since(began), 2*time.Second)
			assert.False(t, got.IsValid())
			assert.ErrorIs(t, err, tc.wantIs)
			assert.Equal(t, tc.permanent, failure.IsPermanent(err))
			if tc.wantAddrs != nil {
				assert.ElementsMatch(t, tc.wantAddrs, dialedAddrs(err))
			}
			assert.True(t, d.allClosed())
		})
	}
}

// dialedAddrs collects the addresses of every *net.OpError in err's tree:
// the attempts the error reports on.
func dialedAddrs(err error) []string {
	if op, ok := err.(*net.OpError); ok && op.Addr != nil {
		return []string{op.Addr.String()}
	}
	var out []string
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			out = append(out, dialedAddrs(e)...)
		}
	case interface{ Unwrap() error }:
		out = dialedAddrs(u.Unwrap())
	}
	return out
}

func BenchmarkRace(b *testing.B) {
	port := listen(b)
	r := &Racer{Port: port}
	v6 := v6Loop
	if !fakecloud.HasIPv6Loopback() {
		v6 = netip.Addr{}
	}
	for b.Loop() {
		if _, err := r.Race(b.Context(), v6, v4Open); err != nil {
			b.Fatal(err)
		}
	}
}
