package coredns

import (
	"net/netip"
	"slices"
)

// HostsAddresses returns the addresses that the inline entries
// ("<ip> <name>…") of the hosts blocks in text give fqdn, in order: what
// CoreDNS answers for the name from a Corefile or a coredns-custom snippet.
// Options inside a block (fallthrough, ttl, reload) are not entries; a
// name matches without regard to case or a trailing dot. It reads the
// entries as SetCorefileHostsEntry writes them.
func HostsAddresses(text, fqdn string) []netip.Addr {
	var out []netip.Addr
	lines := parseCorefile(text)
	for i, l := range lines {
		if len(l.fields) < 2 || l.fields[0] != "hosts" || l.fields[len(l.fields)-1] != "{" {
			continue
		}
		end := blockEnd(lines, i)
		if end < 0 {
			end = len(lines)
		}
		for _, e := range hostsEntries(lines, i, end) {
			if slices.ContainsFunc(e.names, func(n string) bool { return sameHost(n, fqdn) }) {
				out = append(out, e.addr)
			}
		}
	}
	return out
}
