// Package happyeyeballs picks which address of the chosen update server the
// cluster should use: it races TCP connects to the server's IPv6 and IPv4
// literals with RFC 8305 timing and reports the address that answered first.
//
// The winner becomes the cluster's hosts entry for the update server's name,
// so a wrong answer costs every later registration and repository request: an
// IPv6 address that SUSE advertises but the node cannot route would black-hole
// them all. net.Dialer's own fallback only applies to a host name that
// resolves to both families; the update server has two literals and no DNS
// name, hence this package. The race is modelled on net/dial.go's
// dialParallel: the losing attempt is cancelled, a late connection is closed,
// and Race returns only after every attempt has ended, so nothing leaks.
package happyeyeballs
