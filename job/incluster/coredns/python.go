package coredns

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/rancher/registration-engine/job/hostname"
)

// PythonEngineKey is the coredns-custom key SUSE's Python engine
// (SUSE-Enceladus/cloud-registration-engine, src/registration_engine/
// coredns.py at 4ee2871, COREDNS_CUSTOM_KEY) writes its hosts block under.
// The engine takes that key over, and only when it holds nothing but that
// engine's block (pythonEngineEntries): its entry moves into the engine's
// own key and the key is removed, in one edit, which the admission policy
// admits for exactly this shape. Any other .override key with a hosts
// block is still refused (CoreDNS allows one hosts block per server
// block), since its owner may need more than the update server's name.
const PythonEngineKey = "registration.override"

// pythonEngineEntries returns the entries ("<ip> <name>…") of v when v is
// exactly a block SUSE's Python engine writes (coredns.py _hosts_block,
// with more entries when it moved to another update server):
//
//	hosts {
//	    <ip> <fqdn>
//	    fallthrough
//	}
//
// every entry's address unicast (or loopback, for the tests' update
// servers) and every name under domains; nothing else, no ttl, no second
// block. ok is false for anything else, and always without domains.
func pythonEngineEntries(v string, domains []string) (entries []string, ok bool) {
	if len(domains) == 0 {
		return nil, false
	}
	var lines [][]string
	for l := range strings.Lines(v) {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, f)
		}
	}
	if len(lines) < 4 || !slices.Equal(lines[0], []string{"hosts", "{"}) || !slices.Equal(lines[len(lines)-1], []string{"}"}) {
		return nil, false
	}
	fallthroughs := 0
	for _, f := range lines[1 : len(lines)-1] {
		if slices.Equal(f, []string{"fallthrough"}) {
			fallthroughs++
			continue
		}
		if len(f) < 2 {
			return nil, false
		}
		addr, err := netip.ParseAddr(f[0])
		if err != nil || addr.Zone() != "" || !(addr.IsGlobalUnicast() || addr.IsLoopback()) {
			return nil, false
		}
		for _, name := range f[1:] {
			if n, err := hostname.Normalize(name); err != nil || n != name ||
				!slices.ContainsFunc(domains, func(d string) bool { return hostname.Under(name, d) }) {
				return nil, false
			}
		}
		entries = append(entries, strings.Join(f, " "))
	}
	if fallthroughs != 1 || len(entries) == 0 {
		return nil, false
	}
	return entries, true
}
