package fakecloud

import (
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// blackholeListener makes ip:port swallow connection attempts the way an
// unroutable address does: a socket listening with a backlog of 0 whose one
// queue slot is taken at once. Linux then drops every further SYN, so a
// client's connect hangs until its own timeout, with no RST to tell it to
// move on. (A listener that merely never accepts would still complete the
// handshake, and a closed port answers RST at once: neither is a black hole.)
func blackholeListener(ip string, port int) (stop func(), err error) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, err
	}
	family := syscall.AF_INET
	if addr.Is6() {
		family = syscall.AF_INET6
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	closeFD := func() { _ = syscall.Close(fd) }
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		closeFD()
		return nil, err
	}
	var sa syscall.Sockaddr
	if addr.Is6() {
		sa = &syscall.SockaddrInet6{Port: port, Addr: addr.As16()}
	} else {
		sa = &syscall.SockaddrInet4{Port: port, Addr: addr.As4()}
	}
	if err := syscall.Bind(fd, sa); err != nil {
		closeFD()
		return nil, err
	}
	if err := syscall.Listen(fd, 0); err != nil {
		closeFD()
		return nil, err
	}
	filler, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		closeFD()
		return nil, err
	}
	return func() { _ = filler.Close(); closeFD() }, nil
}
