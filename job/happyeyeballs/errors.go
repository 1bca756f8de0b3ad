package happyeyeballs

import "errors"

var (
	// ErrNoAddress means Race was given neither an IPv6 nor an IPv4 address.
	// The caller's data is at fault and another attempt cannot fix it, so it
	// comes wrapped with failure.Permanent.
	ErrNoAddress = errors.New("no address to race")

	// ErrUnreachable means no given address accepted a TCP connection. It is
	// transient: SUSE's update servers and node routing do come back.
	ErrUnreachable = errors.New("no address reachable")
)
