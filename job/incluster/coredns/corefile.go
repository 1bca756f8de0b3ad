package coredns

import (
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rancher/registration-engine/internal/failure"
	"github.com/rancher/registration-engine/job/hostname"
)

// HostsTTL is the TTL, in seconds, of the answers the engine's hosts block
// gives (its "ttl" line). Without one the hosts plugin answers with 3600 s
// (cut to 30 s where the root block has "cache 30", as AKS's and kubeadm's
// do), and every cache between a pod and CoreDNS may keep an address the
// engine has since moved for that long: AKS's LocalDNS caches up to an hour
// (cacheDurationInSeconds 3600) and serves expired answers too. Why 15:
//
//   - At most HANDOVER_SETTLE's default (20 s): the handover writes the
//     Secret only after every CoreDNS replica has served the new address for
//     the settle time, so by then any cache that took the old answer before
//     the last replica reloaded has let it expire, and the operator, which
//     resolves the name right after the write, gets the new address.
//   - Within HANDOVER_TIMEOUT's default (3 m): the handover asks through the
//     pod's own resolver, which on AKS is the node's LocalDNS; the kubelet's
//     ConfigMap sync and the reload plugin (up to about 2 m), plus 15 s for
//     that cache to expire, plus the settle time fit inside it.
//   - Not lower: caches raise a TTL under 5 s anyway (CoreDNS cache's
//     MINTTL), and the address moves at most once a run (every 18 h, or 6 h),
//     so a shorter TTL buys nothing. The cost of 15 s is a cache miss for
//     one name every 15 s on a node whose pods ask for it; only the operator
//     and the engine do.
//
// The CoreDNS admission policy (manifests/base/coredns-policy.yaml) admits
// a ttl line of 1..3600 in the engine's block.
const HostsTTL = 15

// SetCorefileHostsEntry returns corefile with "<ip> <fqdn>" in the hosts
// block of its root server block (".:53 {" or ". {"), where queries for the
// update server's name land. It is idempotent: an entry already in place
// leaves the text byte for byte as it was, so the caller can compare to
// decide whether to write.
//
//   - An entry for fqdn with another address is rewritten; duplicates are
//     dropped; fqdn is taken out of a line that also names other hosts.
//   - Without an entry, the line goes first into the existing hosts block.
//     CoreDNS allows one hosts directive per server block, so a second block
//     would stop CoreDNS from starting.
//   - Without a hosts block, one with fallthrough is inserted at the top of
//     the root server block, so every other name still resolves as before.
//   - A hosts block limited to zones (hosts /etc/hosts corp.internal {)
//     answers only inside them: when none of them covers fqdn, fqdn itself
//     is added to its zones, so the block answers for exactly one more name
//     (and the names under it) and for everything else as before.
//   - The hosts block answers with at most HostsTTL seconds: a block
//     without a ttl line (the plugin's default is 3600 s; so are blocks an
//     older engine wrote) gets "ttl 15" after the entry, and a longer ttl is
//     lowered to it. The ttl is the whole block's, so the block's other
//     entries are then re-asked more often too; that costs cache hits, never
//     a wrong answer. A ttl of HostsTTL or less is kept.
//
// A server block of its own for a zone that covers fqdn (susecloud.net:53 {)
// would answer instead of the root block, so the entry would never be
// served: that Corefile is refused with ErrCorefile.
//
// Entries the engine wrote on earlier runs for update servers no longer
// chosen are removed, so that no name stays pinned to an address Azure
// may since have given to someone else: in the root block's hosts block, a
// line exactly as the engine writes one (earlierEntry) for another name
// under domains (UPDATE_SERVER_DOMAINS), and that name among the block's
// zones when an earlier run added it there. removed lists those entries
// as they were ("<ip> <name>"). Every other entry and line stays byte for
// byte; nil domains remove nothing.
//
// ranges are the cluster's address ranges (CLUSTER_ADDRESS_RANGES, the
// chart's clusterAddressRanges, which the admission policy reads too; nil
// means DefaultClusterRanges): an entry for an address in one of them goes
// only into a hosts block with no_reverse, and an earlier entry at one in a
// block without it is not the engine's (earlierEntry).
func SetCorefileHostsEntry(corefile, fqdn string, ip netip.Addr, domains []string, ranges []netip.Prefix) (next string, removed []string, err error) {
	fqdn, ip, err = validHostsEntry(fqdn, ip)
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(corefile) == "" {
		return "", nil, fmt.Errorf("%w: the Corefile is empty; %s", ErrCorefile, byHand(fqdn, ip))
	}
	lines := parseCorefile(corefile)

	root, rootEnd := -1, -1
	for i, l := range lines {
		if l.depth == 0 && l.opens == 1 && l.closes == 0 && strings.HasSuffix(l.code, "{") && isRootServerBlock(l) {
			root = i
			rootEnd = blockEnd(lines, i)
			break
		}
	}
	switch {
	case root < 0:
		return "", nil, fmt.Errorf("%w: no root server block (.:53 { … }) in the Corefile; %s", ErrCorefile, byHand(fqdn, ip))
	case rootEnd < 0:
		return "", nil, fmt.Errorf("%w: the root server block (line %d) is never closed; close it, or %s", ErrCorefile, root+1, byHand(fqdn, ip))
	}
	for i, l := range lines {
		if l.depth != 0 || l.opens == 0 || i == root {
			continue
		}
		if zone := coveringServerZone(l, fqdn); zone != "" {
			return "", nil, fmt.Errorf("%w: the server block %q (line %d) answers for %s instead of the root server block; %s", ErrCorefile, zone, i+1, fqdn, byHand(fqdn, ip))
		}
	}

	// A hosts block inside the closed root block is closed too (braces
	// nest), at or before rootEnd.
	hosts, hostsEnd := -1, -1
	for i := root + 1; i < rootEnd; i++ {
		if l := lines[i]; l.depth == 1 && len(l.fields) > 0 && l.fields[0] == "hosts" {
			if l.opens != 1 || l.closes != 0 || !strings.HasSuffix(l.code, "{") {
				return "", nil, fmt.Errorf("%w: the root server block has a hosts directive without a block of its own (line %d); %s", ErrCorefile, i+1, byHand(fqdn, ip))
			}
			hosts, hostsEnd = i, blockEnd(lines, i)
			break
		}
	}

	if r, ok := clusterRange(ranges, ip); ok && hosts >= 0 && !noReverse(lines, hosts, hostsEnd) {
		return "", nil, failure.Permanent(fmt.Errorf("%w: the hosts block (line %d) answers reverse (PTR) queries for its entries, and %s is %s, where an entry would rename a cluster address; add no_reverse to that block, or %s", ErrCorefile, hosts+1, ip, clusterRangeText(r), byHand(fqdn, ip)))
	}

	out := make([]string, 0, len(lines)+4)
	for _, l := range lines {
		out = append(out, l.text)
	}

	if hosts < 0 {
		indent := "    "
		for i := root + 1; i < rootEnd; i++ {
			if lines[i].depth == 1 && len(lines[i].fields) > 0 {
				indent = lines[i].indent
				break
			}
		}
		block := strings.Split(hostsBlock(indent, fqdn, ip), "\n")
		return strings.Join(slices.Insert(out, root+1, block...), "\n"), nil, nil
	}
	entry := ip.String() + " " + fqdn
	// New lines take the indent of the block's first line, so that the
	// block keeps its look.
	indent := lines[hosts].indent + "    "
	for i := hosts + 1; i < hostsEnd; i++ {
		if lines[i].depth == 2 && len(lines[i].fields) > 0 {
			indent = lines[i].indent
			break
		}
	}
	// A ttl line is one without braces: one with a brace cannot be
	// rewritten without unbalancing the block, and CoreDNS refuses it
	// anyway, so a valid one is added beside it.
	hasTTL := false
	for i := hosts + 1; i < hostsEnd; i++ {
		l := lines[i]
		if l.depth != lines[hosts].depth+1 || len(l.fields) == 0 || l.fields[0] != "ttl" || l.opens+l.closes > 0 {
			continue
		}
		hasTTL = true
		if len(l.fields) != 2 || !shortTTL(l.fields[1]) {
			out[i] = l.indent + ttlLine
		}
	}
	placed, at := false, hosts
	drop := map[int]bool{}
	var earlier []string // the names of the removed entries
	blockNoReverse := noReverse(lines, hosts, hostsEnd)
	for i, e := range hostsEntries(lines, hosts, hostsEnd) {
		others := slices.DeleteFunc(slices.Clone(e.names), func(n string) bool { return sameHost(n, fqdn) })
		switch {
		case len(others) == len(e.names) && earlierEntry(lines, hosts, i, e, domains, ranges, blockNoReverse):
			drop[i] = true
			removed = append(removed, strings.TrimSpace(lines[i].text))
			earlier = append(earlier, e.names[0])
		case len(others) == len(e.names):
			// another host's entry
		case len(others) > 0:
			out[i] = lines[i].indent + lines[i].fields[0] + " " + strings.Join(others, " ")
		case placed:
			drop[i] = true
		default:
			placed, at = true, i
			if e.addr != ip || len(e.names) != 1 {
				out[i] = lines[i].indent + entry
			}
		}
	}
	out[hosts] = withoutHostsZones(withHostsZone(lines[hosts], fqdn), earlier, fqdn)
	var add []string
	if !placed {
		add = append(add, indent+entry)
	}
	if !hasTTL {
		add = append(add, indent+ttlLine)
	}
	// at (the hosts line, or the entry kept for fqdn) is never dropped.
	edited := make([]string, 0, len(out)+len(add))
	for i, t := range out {
		if drop[i] {
			continue
		}
		edited = append(edited, t)
		if i == at {
			edited = append(edited, add...)
		}
	}
	return strings.Join(edited, "\n"), removed, nil
}

// earlierEntry reports whether line i, an entry e of the hosts block opened
// on line hosts, is one the engine wrote for an update server: exactly
// "<ip> <name>" as hostsBlock writes it (the address in its canonical form,
// one space, one name lower case without a trailing dot; no comment, no
// second name), the name under one of domains (UPDATE_SERVER_DOMAINS), the
// address one the engine maps (unicast; loopback for the tests' servers;
// in a block that answers reverse queries, noReverse false, none in
// ranges, CLUSTER_ADDRESS_RANGES). A line a person wrote in any other shape
// (a comment, a tab, two names, a name outside domains) is theirs and stays.
//
// It is also, line for line, what the CoreDNS admission policy
// (manifests/base/coredns-policy.yaml) counts as the engine's own: an
// entry of that shape directly inside a block whose opening line is
// "hosts [FILE [ZONES…]] {" with nothing after the brace, no brace
// between. Removing any other line would be refused there with HTTP 422,
// failing every run.
func earlierEntry(lines []corefileLine, hosts, i int, e hostsEntry, domains []string, ranges []netip.Prefix, noReverse bool) bool {
	if len(e.names) != 1 || !(e.addr.IsGlobalUnicast() || e.addr.IsLoopback()) {
		return false
	}
	if _, cluster := clusterRange(ranges, e.addr); cluster && !noReverse {
		return false
	}
	name := e.names[0]
	if n, err := hostname.Normalize(name); err != nil || n != name ||
		strings.TrimSpace(lines[i].text) != e.addr.String()+" "+name ||
		!slices.ContainsFunc(domains, func(d string) bool { return hostname.Under(name, d) }) {
		return false
	}
	if !policyHostsLine.MatchString(strings.TrimSpace(lines[hosts].text)) {
		return false
	}
	for _, l := range lines[hosts+1 : i] {
		if strings.ContainsAny(l.text, "{}") {
			return false
		}
	}
	return true
}

// policyHostsLine is the admission policy's opening line of a hosts block.
var policyHostsLine = regexp.MustCompile(`^hosts([ \t][^{}]*)?[{]$`)

// withoutHostsZones returns the text of a "hosts FILE ZONES… {" line
// without the zones that are the names of removed entries (names): the
// zones withHostsZone added on earlier runs for update servers no longer
// chosen. Only a zone as the engine adds it goes (the exact name, between
// single spaces), never one that covers fqdn, and never the file, so the
// block answers for fqdn and keeps every zone of the cluster's own.
func withoutHostsZones(text string, names []string, fqdn string) string {
	for _, name := range names {
		l := parseCorefile(text)[0]
		if len(l.fields) < 4 || zoneCovers(name, fqdn) || !slices.Contains(l.fields[2:len(l.fields)-1], name) {
			continue
		}
		// The zones follow the file, so the last " name " is a zone.
		code := text[len(l.indent) : len(l.indent)+len(l.code)]
		if j := strings.LastIndex(code, " "+name+" "); j > 0 {
			at := len(l.indent) + j
			text = text[:at] + text[at+1+len(name):]
		}
	}
	return text
}

// ttlLine is the hosts block's ttl option as the engine writes it.
var ttlLine = "ttl " + strconv.Itoa(HostsTTL)

// shortTTL reports whether a hosts block's ttl value is one CoreDNS takes
// (1..65535) and at most HostsTTL.
func shortTTL(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n >= 1 && n <= HostsTTL
}

// withHostsZone returns the text of a "hosts [FILE [ZONES...]] {" line that
// answers for fqdn: unchanged when it names no zones (it then answers for
// the server block's) or when one of them covers fqdn; otherwise with fqdn
// added as a zone before the brace.
func withHostsZone(l corefileLine, fqdn string) string {
	args := l.fields[1 : len(l.fields)-1] // between "hosts" and "{"
	if len(args) < 2 {
		return l.text
	}
	for _, zone := range args[1:] {
		if zoneCovers(zone, fqdn) {
			return l.text
		}
	}
	brace := len(l.indent) + len(l.code) - 1 // the code ends with "{"
	return strings.TrimRight(l.text[:brace], " \t") + " " + fqdn + " " + l.text[brace:]
}

// coveringServerZone returns the key of a server block line that would
// answer queries for fqdn on the root block's port (53), other than the root
// zone itself; "" when there is none.
func coveringServerZone(l corefileLine, fqdn string) string {
	for _, k := range l.fields {
		if k == "{" {
			break
		}
		zone := strings.TrimPrefix(k, "dns://")
		port := "53"
		if i := strings.LastIndex(zone, ":"); i >= 0 {
			zone, port = zone[:i], zone[i+1:]
		}
		if port == "53" && zone != "." && zoneCovers(zone, fqdn) {
			return k
		}
	}
	return ""
}

// zoneCovers reports whether name lies in zone: equal to it or under it,
// ignoring case and a trailing dot. The root zone covers every name.
func zoneCovers(zone, name string) bool {
	return zone == "." || hostname.Under(name, zone)
}

// hostsEntry is an inline entry of a hosts block: "<ip> <name>…".
type hostsEntry struct {
	addr  netip.Addr // without an IPv4-in-IPv6 mapping
	names []string   // as written
}

// hostsEntries yields the entries of the hosts block opened on line start
// and closed on line end, with their line numbers. Options inside the block
// (fallthrough, ttl 60, reload 15s) are not entries, nor are the lines of a
// block nested in it.
func hostsEntries(lines []corefileLine, start, end int) iter.Seq2[int, hostsEntry] {
	return func(yield func(int, hostsEntry) bool) {
		for i := start + 1; i < end; i++ {
			l := lines[i]
			if l.depth != lines[start].depth+1 || len(l.fields) < 2 {
				continue
			}
			addr, err := netip.ParseAddr(l.fields[0])
			if err != nil {
				continue
			}
			if !yield(i, hostsEntry{addr: addr.Unmap(), names: l.fields[1:]}) {
				return
			}
		}
	}
}

// sameHost reports whether name, as a Corefile writes it, is fqdn: equal
// without regard to case or a trailing dot.
func sameHost(name, fqdn string) bool {
	return strings.EqualFold(strings.TrimSuffix(name, "."), strings.TrimSuffix(fqdn, "."))
}

// byHand is the remedy when the engine cannot place the entry itself.
func byHand(fqdn string, ip netip.Addr) string {
	return fmt.Sprintf("add %q by hand and set IN_CLUSTER_DNS=false", ip.String()+" "+fqdn)
}

// hostsBlock is the block the engine writes: the entry, its TTL (HostsTTL,
// instead of the plugin's 3600 s), no_reverse, then fallthrough so that
// every other name goes on to the next plugin.
//
// no_reverse: the hosts plugin otherwise answers the reverse (PTR) query
// for every entry's address, ahead of the kubernetes plugin, so an entry
// for a Service's, pod's or node's address would rename that address for
// every PTR lookup in the cluster. The engine needs only the forward
// answer. The admission policy requires the line in the engine's own block.
func hostsBlock(indent, fqdn string, ip netip.Addr) string {
	return indent + "hosts {\n" +
		indent + "    " + ip.String() + " " + fqdn + "\n" +
		indent + "    " + ttlLine + "\n" +
		indent + "    no_reverse\n" +
		indent + "    fallthrough\n" +
		indent + "}"
}

// DefaultClusterRanges are the address ranges of a cluster's own networks
// (private, shared, unique local), where Services, pods and nodes live: the
// default of CLUSTER_ADDRESS_RANGES and, exactly, of the chart's
// clusterAddressRanges (manifests' TestClusterAddressRangesMatchEngine
// fails when they drift). In a hosts block that answers reverse queries
// (no no_reverse; the Corefile layout, where the block may be the
// administrator's), an entry for one of them would rename that address for
// every PTR lookup in the cluster: the admission policy refuses such an
// entry there, so the engine never writes one (ErrCorefile) nor counts one
// as its own. Loopback is for the tests' update servers; link-local is
// refused before (the policy admits unicast addresses only). Never modify
// it: it is the default every caller shares.
var DefaultClusterRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("fc00::/7"),
}

// ParseClusterRanges reads CLUSTER_ADDRESS_RANGES: comma-separated CIDRs,
// each masked to its network, duplicates dropped; at least one. The run
// refuses an error at load; the uninstall hook falls back to the defaults.
func ParseClusterRanges(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			return nil, fmt.Errorf("%q is no address range: want CIDRs such as 10.0.0.0/8 or fc00::/7, comma-separated", part)
		}
		if p = p.Masked(); !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("want at least one address range, such as 10.0.0.0/8")
	}
	return out, nil
}

// clusterRange returns the first of ranges (CLUSTER_ADDRESS_RANGES; nil
// means DefaultClusterRanges) that holds ip, and whether there is one.
func clusterRange(ranges []netip.Prefix, ip netip.Addr) (netip.Prefix, bool) {
	if ranges == nil {
		ranges = DefaultClusterRanges
	}
	i := slices.IndexFunc(ranges, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
	if i < 0 {
		return netip.Prefix{}, false
	}
	return ranges[i], true
}

// clusterRangeText says which range holds a refused address, so that the
// user can find it in the chart's clusterAddressRanges: a default range by
// its kind, any other by its CIDR.
func clusterRangeText(p netip.Prefix) string {
	if slices.Contains(DefaultClusterRanges, p) {
		return "in a private or shared range (clusterAddressRanges, CLUSTER_ADDRESS_RANGES)"
	}
	return "in " + p.String() + " (clusterAddressRanges, CLUSTER_ADDRESS_RANGES)"
}

// noReverse reports whether the hosts block opened on line start and
// closed on line end answers no reverse queries: a bare no_reverse line
// directly inside it.
func noReverse(lines []corefileLine, start, end int) bool {
	for _, l := range lines[start+1 : end] {
		if l.depth == lines[start].depth+1 && slices.Equal(l.fields, []string{"no_reverse"}) {
			return true
		}
	}
	return false
}

// hasDirective reports whether any line of a Corefile (or of a snippet)
// starts with the directive name.
func hasDirective(text, name string) bool {
	for _, l := range parseCorefile(text) {
		if len(l.fields) > 0 && l.fields[0] == name {
			return true
		}
	}
	return false
}

type corefileLine struct {
	text   string   // as written
	code   string   // without comment, trimmed
	indent string   // leading white space
	fields []string // of code, with braces split off
	depth  int      // brace depth before the line
	opens  int
	closes int
}

// parseCorefile splits a Corefile into lines with their brace depth. It
// knows just enough Caddyfile syntax for SetCorefileHostsEntry: comments
// start with # at the beginning of a token, and braces nest.
func parseCorefile(text string) []corefileLine {
	raw := strings.Split(text, "\n")
	lines := make([]corefileLine, len(raw))
	depth := 0
	for i, t := range raw {
		code := t
		for j := 0; j < len(code); j++ {
			if code[j] == '#' && (j == 0 || code[j-1] == ' ' || code[j-1] == '\t') {
				code = code[:j]
				break
			}
		}
		code = strings.TrimSpace(code)
		l := corefileLine{
			text:   t,
			code:   code,
			indent: t[:len(t)-len(strings.TrimLeft(t, " \t"))],
			depth:  depth,
			opens:  strings.Count(code, "{"),
			closes: strings.Count(code, "}"),
		}
		spaced := strings.NewReplacer("{", " { ", "}", " } ").Replace(code)
		l.fields = strings.Fields(spaced)
		depth = max(0, depth+l.opens-l.closes)
		lines[i] = l
	}
	return lines
}

// blockEnd returns the line that closes the block opened on line start, or
// -1 when it is never closed.
func blockEnd(lines []corefileLine, start int) int {
	open := lines[start].depth
	for i := start + 1; i < len(lines); i++ {
		if lines[i].closes > 0 && lines[i].depth+lines[i].opens-lines[i].closes <= open {
			return i
		}
	}
	return -1
}

// importsKey reports whether the Corefile's root server block imports a
// file named key from coredns-custom's volume: an import line whose glob's
// last element matches key ("import custom/*.override" on AKS,
// "import /etc/coredns/custom/*.override" on k3s).
func importsKey(corefile, key string) bool {
	lines := parseCorefile(corefile)
	for i, l := range lines {
		if l.depth != 0 || l.opens <= l.closes || !isRootServerBlock(l) {
			continue
		}
		end := blockEnd(lines, i)
		if end < 0 {
			end = len(lines)
		}
		for _, in := range lines[i+1 : end] {
			if in.depth != 1 || len(in.fields) < 2 || in.fields[0] != "import" {
				continue
			}
			for _, glob := range in.fields[1:] {
				if ok, err := path.Match(path.Base(glob), key); err == nil && ok {
					return true
				}
			}
		}
	}
	return false
}

// isRootServerBlock reports whether a server block's keys include the root
// zone on port 53 or on the default port: ".", ".:53", "dns://.:53".
func isRootServerBlock(l corefileLine) bool {
	for _, k := range l.fields {
		if k == "{" {
			break
		}
		k = strings.TrimPrefix(k, "dns://")
		if k == "." || k == ".:53" {
			return true
		}
	}
	return false
}

// validHostsEntry checks what is about to be written into CoreDNS's
// configuration and returns it normalised: the name lower case without a
// trailing dot, the address without an IPv4-in-IPv6 mapping. Both come from
// a region server's answer, and a stray brace or newline in them would
// break cluster DNS for every pod. The name is checked by hostname.Normalize,
// the rule phase 4 applies when it reads the region data, so a name refused
// here was already refused there, while a sibling could still be tried.
func validHostsEntry(fqdn string, ip netip.Addr) (string, netip.Addr, error) {
	name, err := hostname.Normalize(fqdn)
	if err != nil {
		return "", netip.Addr{}, failure.Permanent(fmt.Errorf("%w: %w", ErrInvalidHostsEntry, err))
	}
	ip = ip.Unmap()
	if !ip.IsValid() {
		return "", netip.Addr{}, failure.Permanent(fmt.Errorf("%w: no IP address for %s", ErrInvalidHostsEntry, name))
	}
	if ip.IsUnspecified() || ip.Zone() != "" {
		return "", netip.Addr{}, failure.Permanent(fmt.Errorf("%w: %q is not a usable IP address", ErrInvalidHostsEntry, ip.String()))
	}
	return name, ip, nil
}
