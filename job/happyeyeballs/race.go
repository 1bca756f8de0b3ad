package happyeyeballs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/rancher/registration-engine/internal/failure"
)

// Defaults used when the matching Racer field is zero.
const (
	// DefaultPort is HTTPS, the port the update server is used on.
	DefaultPort = 443
	// DefaultDelay is RFC 8305's recommended head start for IPv6.
	DefaultDelay = 250 * time.Millisecond
	// DefaultAttemptTimeout bounds each connect, as SUSE's own engine does.
	DefaultAttemptTimeout = 2 * time.Second
)

// Racer races one IPv6 and one IPv4 address of the same server. The zero
// value is ready to use; the fields exist so tests and unusual networks can
// change the timing and the dialer.
type Racer struct {
	// Port is the TCP port both attempts connect to; 0 means DefaultPort.
	Port int
	// Delay is how long IPv4 waits for IPv6 before it starts too; an IPv6
	// failure starts IPv4 at once. 0 means DefaultDelay. A longer delay makes
	// IPv4-only nodes slower to decide; a shorter one favours IPv4 even
	// where IPv6 works.
	Delay time.Duration
	// AttemptTimeout bounds each connect; 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Dial opens the connections; nil means a plain net.Dialer. It must
	// return promptly once its context is done: Race waits for every attempt
	// before it returns, so a Dial that ignores cancellation holds Race up.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

type attempt struct {
	addr netip.Addr
	conn net.Conn
	err  error
}

// Race connects to v6 at once and to v4 after Delay (or as soon as v6
// fails), and returns the address whose connect succeeded first. The
// connection itself is closed: the caller only needs to know which address
// works. A zero address means that family is absent, so one family alone is
// raced against nothing.
//
// When neither address connects, the error wraps ErrUnreachable and names
// both attempts; it is transient. When ctx ends first, the error wraps
// ctx.Err(). Both addresses zero is ErrNoAddress, permanent.
//
// Race returns only after every attempt it started has finished and every
// connection it opened is closed.
func (r *Racer) Race(ctx context.Context, v6, v4 netip.Addr) (netip.Addr, error) {
	if !v6.IsValid() && !v4.IsValid() {
		return netip.Addr{}, failure.Permanent(fmt.Errorf("happyeyeballs: %w", ErrNoAddress))
	}
	port := r.Port
	if port == 0 {
		port = DefaultPort
	}
	if port < 1 || port > 65535 {
		return netip.Addr{}, failure.Permanent(fmt.Errorf("happyeyeballs: port %d out of range", port))
	}
	delay := r.Delay
	if delay <= 0 {
		delay = DefaultDelay
	}
	timeout := r.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}

	primary, fallback := v6, v4
	if !primary.IsValid() {
		primary, fallback = v4, netip.Addr{}
	}

	raceCtx, cancel := context.WithCancel(ctx)
	// results is unbuffered: an attempt that finishes after Race has decided
	// sees returned closed instead and closes its own connection. Nothing
	// ever closes results, so nothing can send on a closed channel.
	results := make(chan attempt)
	returned := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		cancel()
		close(returned)
		wg.Wait()
	}()

	start := func(addr netip.Addr) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := r.dial(raceCtx, addr, port, timeout)
			select {
			case results <- attempt{addr: addr, conn: conn, err: err}:
			case <-returned:
				if conn != nil {
					_ = conn.Close()
				}
			}
		}()
	}

	start(primary)
	pending := 1
	var fallbackTimer <-chan time.Time
	if fallback.IsValid() {
		t := time.NewTimer(delay)
		defer t.Stop()
		fallbackTimer = t.C
	}
	var failed failure.List
	for {
		select {
		case <-fallbackTimer:
			fallbackTimer = nil
			start(fallback)
			pending++
		case a := <-results:
			pending--
			if a.err == nil {
				_ = a.conn.Close()
				return a.addr, nil
			}
			failed = append(failed, fmt.Errorf("%s %s: %w", family(a.addr), netip.AddrPortFrom(a.addr, uint16(port)), a.err))
			if fallbackTimer != nil {
				// The primary failed before the head start ran out: no
				// reason to keep the fallback waiting.
				fallbackTimer = nil
				start(fallback)
				pending++
			}
			if pending > 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return netip.Addr{}, fmt.Errorf("happyeyeballs: %w", err)
			}
			return netip.Addr{}, fmt.Errorf("happyeyeballs: %w: %w", ErrUnreachable, failed)
		}
	}
}

func (r *Racer) dial(ctx context.Context, addr netip.Addr, port int, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	dial := r.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	conn, err := dial(ctx, "tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		return nil, err
	}
	if conn == nil {
		return nil, errors.New("dial returned no connection")
	}
	return conn, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}
