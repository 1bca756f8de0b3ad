// Package regionconfig reads /etc/regionserverclnt.cfg, the INI file that
// tells a SUSE cloud guest where its region servers are and which pinned
// certificate each one must present. The engine reads it at start, with its
// other settings (job.LoadConfig), and phase 3 reports what it found.
//
// The file format is the one SUSE's cloudregister client reads with Python's
// configparser.RawConfigParser, and installers write it for that client, so
// Parse follows RawConfigParser rather than INI conventions elsewhere: no %
// interpolation, case-insensitive keys but case-sensitive section names,
// "key = value" or "key: value", full-line "#" and ";" comments only (a "#"
// after a value is part of the value), no quote stripping, no backslash
// continuation, and indented lines continue the previous value. Two
// gopkg.in/ini.v1 extensions that RawConfigParser lacks cannot be switched
// off: values wrapped in backticks or triple double quotes are unwrapped.
// Keys in a [DEFAULT] section are not inherited by [server]; the real
// configurations have no [DEFAULT] section.
//
// Parsing is pure: Parse never touches the file system or the network. Load
// reads one file and nothing else, so LoadConfig reports every problem of the
// file, beside those of the other settings, before the engine contacts
// anything. Nothing here is retried: every error is marked failure.Permanent.
package regionconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/ini.v1"

	"github.com/rancher/registration-engine/internal/failure"
)

// DefaultPath is where SLES images carry the file and where the manifests
// mount it: REGIONSRV_CONFIG's default.
const DefaultPath = "/etc/regionserverclnt.cfg"

// MaxSize bounds what Load reads. Real files are a few hundred bytes; a
// larger file is a wrong mount (a directory of certificates, a log), and
// reading it whole would only delay the error.
const MaxSize = 64 << 10

// metadataPlaceholder is the value SUSE's template ships for metadata_server.
// cloudregister treats the mere presence of the key as "skip the region
// servers", so a template copied verbatim would send it to a URL that does
// not exist; it means "unset".
const metadataPlaceholder = "OPTIONAL_URL_FOR_METADATA_SERVER_SMT_INFO"

// Settings is what a run needs from the file. The zero value is not usable;
// get one from Parse or Load, which guarantee API, CertLocation and at least
// one RegionServers entry.
type Settings struct {
	// API is the path of the region-server query, "regionInfo" in every
	// known configuration (the query is https://<server>/<API>).
	API string
	// CertLocation is the directory of the region servers' pinned
	// certificates; see CertPath.
	CertLocation string
	// RegionServers are the [server] regionsrv entries exactly as written
	// (trimmed), in file order: IPv4 literals, IPv6 literals without
	// brackets, or host names. They are also the certificate file names, so
	// they must not be normalised (an IPv6 written in full keeps its zeros).
	RegionServers []string
	// MetadataServer is [server] metadata_server when it is an absolute
	// https URL (an http URL is an error wrapping ErrInsecureMetadataServer);
	// "" otherwise (missing, "none", or the template
	// placeholder). cloudregister skips the region servers entirely when
	// the key exists; we only honour a usable URL.
	MetadataServer string
	// DataProvider is the [instance] dataProvider command line; "" when
	// missing or "none". The engine does not run it (the cloud provider
	// builds the instance data) but reports it.
	DataProvider string
	// InstanceArgs is the [instance] instanceArgs plugin name ("msftazure",
	// "amazonec2", "googlece"); "" when missing or "none".
	InstanceArgs string
	// HTTPSOnly is [instance] httpsOnly; only the exact string "true" sets
	// it, as in cloudregister. It selects https for the update server's
	// certificate download.
	HTTPSOnly bool
}

// CertPath is the pinned certificate file for one RegionServers entry:
// <CertLocation>/<entry>.pem, cleaned, with the entry exactly as written (an
// IPv6 entry keeps its colons). This is the name SUSE's certificate packages
// and genRegionServerCert use; changing it means no region server is
// trusted.
func (s Settings) CertPath(entry string) string {
	return filepath.Clean(s.CertLocation + "/" + entry + ".pem")
}

// Load reads at most MaxSize bytes of the file at path and parses it. The
// path names the file in every error.
func Load(path string) (Settings, error) {
	f, err := os.Open(path)
	if err != nil {
		return Settings{}, failure.Permanent(fmt.Errorf("regionconfig: %w: %w", ErrRead, err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return Settings{}, failure.Permanent(fmt.Errorf("regionconfig: %w: %s: %w", ErrRead, path, err))
	}
	if len(data) > MaxSize {
		return Settings{}, failure.Permanent(fmt.Errorf("regionconfig: %w: %s: larger than %d bytes", ErrRead, path, MaxSize))
	}
	return Parse(data, path)
}

// Parse interprets data as a regionserverclnt.cfg. name is only used in
// error messages (normally the file's path). All problems of a file are
// reported in one error, each naming its section and key, so one fix-up
// round is enough.
func Parse(data []byte, name string) (Settings, error) {
	fail := func(err error) (Settings, error) {
		return Settings{}, failure.Permanent(fmt.Errorf("regionconfig: %s: %w", name, err))
	}
	if !utf8.Valid(data) {
		return fail(fmt.Errorf("%w: not UTF-8 text", ErrSyntax))
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return fail(fmt.Errorf("%w: contains NUL bytes", ErrSyntax))
	}
	file, err := ini.LoadSources(ini.LoadOptions{
		InsensitiveKeys:            true, // RawConfigParser lower-cases option names
		IgnoreInlineComment:        true, // Python 3 has no inline comments by default
		IgnoreContinuation:         true, // a trailing backslash is just a character
		PreserveSurroundedQuote:    true, // quotes are part of the value
		AllowPythonMultilineValues: true, // indented lines continue a value
		AllowShadows:               true, // keep duplicates so we can refuse them
		KeyValueDelimiters:         "=:",
	}, data)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrSyntax, err))
	}

	var problems []error
	server, err := file.GetSection("server")
	if err != nil {
		return fail(fmt.Errorf("section [server]: %w (needs api, certLocation, regionsrv)", ErrMissingKey))
	}
	get := func(sec *ini.Section, section, key string) (string, bool) {
		if sec == nil || !sec.HasKey(key) {
			return "", false
		}
		k := sec.Key(key)
		if vals := k.ValueWithShadows(); len(vals) > 1 {
			problems = append(problems, fmt.Errorf("[%s] %s: %w", section, key, ErrDuplicateKey))
		}
		return strings.TrimSpace(k.String()), true
	}
	required := func(key string) string {
		v, _ := get(server, "server", key)
		if v == "" {
			problems = append(problems, fmt.Errorf("[server] %s: %w", key, ErrMissingKey))
		}
		return v
	}

	var s Settings
	s.API = required("api")
	s.CertLocation = required("certLocation")
	if raw := required("regionsrv"); raw != "" {
		for _, entry := range strings.Split(raw, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue // a trailing or doubled comma; cloudregister would try "" and fail
			}
			if err := checkRegionServer(entry); err != nil {
				problems = append(problems, fmt.Errorf("[server] regionsrv: entry %q: %w", entry, err))
				continue
			}
			s.RegionServers = append(s.RegionServers, entry)
		}
		if len(s.RegionServers) == 0 && len(problems) == 0 {
			problems = append(problems, fmt.Errorf("[server] regionsrv: %w (no entries)", ErrMissingKey))
		}
	}
	if v, _ := get(server, "server", "metadata_server"); isHTTPURL(v) {
		if u, _ := url.Parse(v); u.Scheme != "https" {
			// Its answer names the update server and the fingerprint of the
			// certificate the cluster will trust: over http, anyone on the
			// path could choose both.
			problems = append(problems, fmt.Errorf("[server] metadata_server %q: %w", v, ErrInsecureMetadataServer))
		} else {
			s.MetadataServer = v
		}
	}

	instance, _ := file.GetSection("instance") // optional
	s.DataProvider = optional(get(instance, "instance", "dataProvider"))
	s.InstanceArgs = optional(get(instance, "instance", "instanceArgs"))
	httpsOnly, _ := get(instance, "instance", "httpsOnly")
	s.HTTPSOnly = httpsOnly == "true"

	if len(problems) > 0 {
		return fail(joined(problems))
	}
	return s, nil
}

// optional maps cloudregister's "none" (and a missing key) to "".
func optional(v string, _ bool) string {
	if strings.EqualFold(v, "none") {
		return ""
	}
	return v
}

// isHTTPURL reports whether v is an absolute http(s) URL with a host; the
// template placeholder and "none" are not.
func isHTTPURL(v string) bool {
	if v == "" || v == metadataPlaceholder || strings.EqualFold(v, "none") {
		return false
	}
	u, err := url.Parse(v)
	if err != nil {
		return false
	}
	return (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Hostname() != ""
}

// checkRegionServer accepts what cloudregister can use as a region server
// and as a certificate file name: an IPv4 literal, an IPv6 literal without
// brackets or zone, or a host name of letters, digits and hyphens. The
// returned error wraps ErrInvalidRegionServer and says what looks wrong.
func checkRegionServer(entry string) error {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrInvalidRegionServer, why) }
	switch {
	case strings.ContainsFunc(entry, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return bad("white space or control characters (separate entries with commas)")
	case strings.Contains(entry, "://"):
		return bad("a URL (write only the address or host name)")
	case strings.ContainsAny(entry, "[]"):
		return bad("brackets (write IPv6 addresses without them)")
	case strings.Contains(entry, "/"):
		return bad("a slash (write only the address or host name)")
	}
	if addr, err := netip.ParseAddr(entry); err == nil {
		if addr.Zone() != "" {
			return bad("an IPv6 zone (region servers are not link-local)")
		}
		return nil
	}
	if strings.Contains(entry, ":") {
		if host, port, err := splitHostPort(entry); err == nil && checkRegionServer(host) == nil {
			return bad("a port " + port + " (region servers are always queried on 443)")
		}
		return bad("malformed IPv6 address")
	}
	return checkHostName(entry, bad)
}

// splitHostPort splits "host:port" with a numeric port; IPv6 literals never
// reach it with a single colon.
func splitHostPort(s string) (host, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	host, port = s[:i], s[i+1:]
	if strings.Contains(host, ":") {
		return "", "", errors.New("more than one colon")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", "", err
	}
	return host, port, nil
}

// checkHostName applies RFC 1123 host-name syntax, and refuses names whose
// last label is all digits: those are mistyped IPv4 addresses ("1.2.3.256",
// "10.0.0"), and no top-level domain is numeric.
func checkHostName(name string, bad func(string) error) error {
	if len(name) > 253 {
		return bad("host name longer than 253 characters")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" {
			return bad("host name has an empty label (leading, trailing or doubled dot)")
		}
		if len(l) > 63 {
			return bad("host name label longer than 63 characters")
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return bad("host name label starts or ends with a hyphen")
		}
		for _, r := range l {
			if !(r == '-' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
				return bad(fmt.Sprintf("character %q is not allowed in a host name", r))
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return bad("malformed IPv4 address")
	}
	return nil
}

// joined reports several problems on one line (a log line per run, not per
// problem) while errors.Is still sees each of them.
func joined(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return failure.List(errs)
}
