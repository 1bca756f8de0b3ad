package inclusterdns

import (
	"net/netip"
	"strings"
)

// HostsAddresses returns the addresses that the inline entries
// ("<ip> <name>…") of the hosts blocks in text give fqdn, in order: what
// CoreDNS answers for the name from a Corefile or a coredns-custom snippet.
// Options inside a block (fallthrough, ttl, reload) are not entries; a
// name matches without regard to case or a trailing dot.
func HostsAddresses(text, fqdn string) []netip.Addr {
	fqdn = strings.ToLower(strings.TrimSuffix(fqdn, "."))
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
		for _, e := range lines[i+1 : end] {
			if e.depth != l.depth+1 || len(e.fields) < 2 {
				continue
			}
			addr, err := netip.ParseAddr(e.fields[0])
			if err != nil {
				continue
			}
			for _, n := range e.fields[1:] {
				if strings.EqualFold(strings.TrimSuffix(n, "."), fqdn) {
					out = append(out, addr.Unmap())
					break
				}
			}
		}
	}
	return out
}
