package fakecloud

import (
	"cmp"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options shape a whole fake cloud.
type Options struct {
	// Dir receives the files the engine needs (see Cloud.Env).
	Dir string
	// Host is the address of IMDS, Entra and ARM: the one they bind and
	// the one their certificate and Env name (default 127.0.0.1); with
	// Listen, only the one named.
	Host string
	// RegionIPs and UpdateIPs are the loopback addresses of the two region
	// servers and the two update servers (defaults 127.0.0.2/3 and
	// 127.0.0.4/5; the first update server also gets [::1] when the machine
	// has IPv6 loopback).
	RegionIPs, UpdateIPs []string
	// UpdateServerName is the FQDN the region servers hand out.
	UpdateServerName string
	// Plan is what ARM reports for the extension (default suse/sles-15-sp7/premium).
	Plan AzurePlan
	// Faults to switch on at start (see Faults).
	Faults []string
	// RegCode is the one registration code the update servers' SCC API
	// accepts (any other gets 401); empty accepts every code.
	RegCode string
	// UpdateCertValidity is how long the update servers' certificates are
	// valid from the start, for a certificate close to its expiry; 0 means
	// a year.
	UpdateCertValidity time.Duration

	// Listen, when set, is the one address every server binds (a pod's
	// "0.0.0.0"); Host, RegionIPs and UpdateIPs are then only what is
	// advertised in certificates, the region servers' answers and Env, so
	// there is one region server and one update server, each on its own
	// port, and no [::1]. Host may then be a name (a Service's), which is
	// also the regionsrv entry unless RegionIPs says otherwise; UpdateIPs
	// must be an IP the engine can reach (a pod's), default Host. Empty:
	// every server binds the loopback address it is known by.
	Listen string
	// Ports fixes ports, for a Service in front of a pod: IMDS, Entra and
	// ARM always, the region and update servers only with Listen (on
	// loopback they share a port over several addresses and get a free
	// one). 0 picks a free port.
	Ports Ports
	// Names are more names in the certificate of Entra and ARM, for an
	// engine that reaches them by name through a forward proxy (Go never
	// proxies a loopback address, so a test of the engine's proxy use
	// names them, and the proxy routes the names to Host).
	Names []string
	// FederatedSubject, when set, makes Entra accept as client_assertion a
	// Kubernetes ServiceAccount token with this subject
	// ("system:serviceaccount:<namespace>:<name>"), audience
	// api://AzureADTokenExchange and an expiry in the future, as a federated
	// identity credential does, besides the configured federated token. Its
	// signature is not checked: the fake has no way to the cluster's keys.
	FederatedSubject string
}

// Ports are fixed ports of a fake cloud; 0 means any free port.
type Ports struct {
	IMDS, Entra, ARM, Region, UpdateHTTPS, UpdateHTTP int
}

// Cloud is every fake peer of one engine run, serving on loopback.
type Cloud struct {
	Azure   *Azure
	Regions []*RegionServer
	Updates []*UpdateServer

	opts  Options
	env   map[string]string
	stops []func()
	ipv6  bool

	starting bool

	// federation is the federated identity credential Entra checks
	// assertions against, once a test sets one (SetFederation).
	federation federation
}

// Fault is one failure the fake cloud can play, by name.
type Fault struct {
	Name, Effect string
	apply        func(c *Cloud) error
}

// Faults lists every fault Start and the admin endpoint accept.
var Faults = []Fault{
	{"wrong-plan", "ARM reports a different Marketplace plan: the run fails, permanent", func(c *Cloud) error {
		p := c.Azure.Plan()
		p.Name += "-other"
		c.Azure.SetPlan(p)
		return nil
	}},
	{"no-plan", "ARM reports the extension without a plan: permanent", func(c *Cloud) error { c.Azure.NoPlan.Store(true); return nil }},
	{"arm-403", "ARM answers 403 AuthorizationFailed: permanent, names the role assignment", func(c *Cloud) error { c.Azure.ARMStatus.Store(403); return nil }},
	{"other-cluster", "ARM reports another node resource group for the extension's managed cluster than the node's IMDS: the extension is another cluster's, permanent", func(c *Cloud) error {
		c.Azure.OtherCluster.Store(true)
		return nil
	}},
	{"cluster-403", "ARM lets the identity read the extension but answers 403 for its managed cluster: permanent, names the role", func(c *Cloud) error {
		c.Azure.ManagedClusterStatus.Store(403)
		return nil
	}},
	{"arm-429", "ARM throttles twice (Retry-After: 1): succeeds after backoff", func(c *Cloud) error {
		c.Azure.ARM429.Store(2)
		c.Azure.RetryAfterSeconds.Store(1)
		return nil
	}},
	{"arm-5xx", "ARM answers 503 twice: succeeds after backoff", func(c *Cloud) error { c.Azure.ARM5xx.Store(2); return nil }},
	{"imds-429", "IMDS throttles twice: succeeds after backoff", func(c *Cloud) error { c.Azure.IMDS429.Store(2); return nil }},
	{"identity-token-429", "IMDS's managed identity token endpoint throttles once: succeeds after backoff (managed-identity mode)", func(c *Cloud) error {
		c.Azure.IdentityToken429.Store(1)
		return nil
	}},
	{"identity-not-found", "IMDS's managed identity token endpoint answers 400 Identity not found: permanent, names AZURE_CLIENT_ID (managed-identity mode)", func(c *Cloud) error {
		c.Azure.IdentityNotFound.Store(true)
		return nil
	}},
	{"imds-500", "IMDS answers 500 twice: succeeds after backoff", func(c *Cloud) error { c.Azure.IMDS500.Store(2); return nil }},
	{"tampered-document", "one byte of the signed content changes: the signature check fails, permanent", func(c *Cloud) error { c.Azure.TamperDocument.Store(true); return nil }},
	{"cached-nonce", "IMDS serves a stale nonce twice: retried, then succeeds", func(c *Cloud) error { c.Azure.CachedNonce.Store(2); return nil }},
	{"unknown-root", "the attested document chains to an unknown root: permanent", func(c *Cloud) error { c.Azure.UnknownRoot.Store(true); return nil }},
	{"wrong-signer", "the attested document is signed by a certificate not named metadata.azure.com: permanent", func(c *Cloud) error { c.Azure.WrongSigner.Store(true); return nil }},
	{"node-clock-behind", "the attested document is dated 10 minutes ahead, as a node whose clock is 10 minutes behind sees it: transient, the Job retries", func(c *Cloud) error {
		c.Azure.Forge.Store(&Forgery{CreatedAhead: 10 * time.Minute})
		return nil
	}},
	{"node-clock-ahead", "the attested document expired an hour ago, as a node whose clock is 7 hours ahead sees it: transient, the Job retries", func(c *Cloud) error {
		c.Azure.Forge.Store(&Forgery{CreatedAhead: -7 * time.Hour})
		return nil
	}},
	{"slow-imds", "IMDS answers after 1 s: succeeds, slower", func(c *Cloud) error { c.Azure.Slow.Store(int64(time.Second)); return nil }},
	{"region-down", "the first region server refuses connections: the second answers, succeeds", func(c *Cloud) error {
		c.Regions[0].SetFaults(RegionFaults{Down: true})
		return nil
	}},
	{"region-garbage", "both region servers send garbage XML: transient failure naming them", func(c *Cloud) error {
		for _, r := range c.Regions {
			r.SetFaults(RegionFaults{GarbageXML: true})
		}
		return nil
	}},
	{"update-server-offline", "the first update server reports offline: its sibling is chosen", func(c *Cloud) error {
		c.Updates[0].SetFaults(UpdateFaults{Offline: true})
		return nil
	}},
	{"wrong-fingerprint", "every update server's certificate mismatches its fingerprint: fails", func(c *Cloud) error {
		for _, u := range c.Updates {
			u.SetFaults(UpdateFaults{WrongCert: true})
		}
		return nil
	}},
	{"health-404", "the update servers are old SMTs without /api/health/status: the certificate fallback finds them alive", func(c *Cloud) error {
		for _, u := range c.Updates {
			u.SetFaults(UpdateFaults{Health404: true})
		}
		return nil
	}},
	{"scc-401", "the update servers' SCC API refuses every registration code (401 Unknown Registration Code.): rancher/scc-operator's Registration fails", func(c *Cloud) error {
		for _, u := range c.Updates {
			u.setFault(func(f *UpdateFaults) { f.SCCRefuseCode = true })
		}
		return nil
	}},
	{"scc-announce-5xx", "the update servers' SCC API answers 500 to every announce: rancher/scc-operator's Registration fails", func(c *Cloud) error {
		for _, u := range c.Updates {
			u.setFault(func(f *UpdateFaults) { f.SCCAnnounce5xx = true })
		}
		return nil
	}},
	{"scc-no-activations", "the update servers' SCC API lists no activation for an announced system: the Registration is never activated", func(c *Cloud) error {
		for _, u := range c.Updates {
			u.setFault(func(f *UpdateFaults) { f.SCCNoActivations = true })
		}
		return nil
	}},
	{"heal", "switches off what the refusals and outages above switched on (ARM's and IMDS's refusals, no plan, another cluster, the region and update servers' faults), as Azure does once it has propagated an identity or a role and SUSE's servers do once they are back: the next run succeeds", func(c *Cloud) error {
		c.Azure.ARMStatus.Store(0)
		c.Azure.ManagedClusterStatus.Store(0)
		c.Azure.IdentityNotFound.Store(false)
		c.Azure.NoPlan.Store(false)
		c.Azure.OtherCluster.Store(false)
		for _, r := range c.Regions {
			r.SetFaults(RegionFaults{})
		}
		for _, u := range c.Updates {
			u.SetFaults(UpdateFaults{})
		}
		return nil
	}},
	{"imds-restricted", "every connect to IMDS is dropped, as AKS's IMDS restriction drops a non-hostNetwork pod's packets to 169.254.169.254: detection falls back to DMI, phase 2 fails permanently naming the restriction and the chart value hostNetwork (start-up only)", atStart("imds-restricted")},
	{"ipv6-blackhole", "the update server's IPv6 address never answers a connect: succeeds over IPv4 (start-up only)", atStart("ipv6-blackhole")},
	{"off-cloud", "a host on no cloud: every connect to the metadata endpoints (Azure, GCP, AWS) is dropped and DMI names a bare-metal server: detection gives up after its budget, exit 2 in phase 1 (start-up only)", atStart("off-cloud")},
}

// atStart is the apply of a fault that Start plays (it shapes what Start
// serves or writes) and the admin endpoint refuses.
func atStart(name string) func(c *Cloud) error {
	return func(c *Cloud) error {
		if !c.starting {
			return fmt.Errorf("fakecloud: %s can only be chosen at start", name)
		}
		return nil
	}
}

// FaultNames returns the names of Faults.
func FaultNames() []string {
	var out []string
	for _, f := range Faults {
		out = append(out, f.Name)
	}
	return out
}

// Start serves a whole fake cloud on loopback and writes into opts.Dir:
// ca.pem (trust for Entra and ARM), attestation-roots.pem and
// attestation-intermediate.pem (the fake IMDS chain), certs/<ip>.pem (the region servers' certificates),
// regionserverclnt.cfg, token (the federated token), dmi/ (an Azure DMI
// tree) and env (KEY=value lines: every override the engine needs).
func Start(opts Options) (_ *Cloud, err error) {
	if opts.Dir == "" {
		return nil, errors.New("fakecloud: no directory to write into")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.Listen != "" {
		if len(opts.RegionIPs) == 0 {
			opts.RegionIPs = []string{opts.Host}
		}
		if len(opts.UpdateIPs) == 0 {
			opts.UpdateIPs = []string{opts.Host}
		}
		if net.ParseIP(opts.UpdateIPs[0]) == nil {
			return nil, fmt.Errorf("fakecloud: the update server's address %q is not an IP (region servers hand out IPs)", opts.UpdateIPs[0])
		}
		if len(opts.RegionIPs) != 1 || len(opts.UpdateIPs) != 1 {
			return nil, fmt.Errorf("fakecloud: listening on %s serves one region server and one update server, not %v and %v",
				opts.Listen, opts.RegionIPs, opts.UpdateIPs)
		}
	}
	if len(opts.RegionIPs) == 0 {
		opts.RegionIPs = []string{"127.0.0.2", "127.0.0.3"}
	}
	if len(opts.UpdateIPs) == 0 {
		opts.UpdateIPs = []string{"127.0.0.4", "127.0.0.5"}
	}
	if opts.UpdateServerName == "" {
		opts.UpdateServerName = "smt-azure.susecloud.net"
	}
	c := &Cloud{opts: opts, env: map[string]string{}, ipv6: opts.Listen == "" && HasIPv6Loopback(), starting: true}
	defer func() { c.starting = false }()
	blackhole := slices.Contains(opts.Faults, "ipv6-blackhole")
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	azCfg := DefaultAzureConfig()
	if opts.Plan != (AzurePlan{}) {
		azCfg.Plan = opts.Plan
	}
	if c.Azure, err = NewAzure(azCfg); err != nil {
		return nil, err
	}
	azCfg = c.Azure.Config()
	for _, d := range []string{opts.Dir, filepath.Join(opts.Dir, "certs"), filepath.Join(opts.Dir, "dmi")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}

	// Entra and ARM speak TLS with a certificate from our CA.
	ca, err := NewCA("fakecloud CA")
	if err != nil {
		return nil, err
	}
	cert, err := ca.Issue(append([]string{opts.Host, "localhost"}, opts.Names...)...)
	if err != nil {
		return nil, err
	}
	imds, err := c.serve(opts.Host, opts.Ports.IMDS, c.adminMux(c.Azure.IMDSHandler()), nil)
	if err != nil {
		return nil, err
	}
	entraHandler := c.acceptFederated(c.Azure.EntraHandler(), opts.FederatedSubject, azCfg.FederatedToken)
	entra, err := c.serve(opts.Host, opts.Ports.Entra, entraHandler, &cert)
	if err != nil {
		return nil, err
	}
	arm, err := c.serve(opts.Host, opts.Ports.ARM, c.Azure.ARMHandler(), &cert)
	if err != nil {
		return nil, err
	}

	// Two update servers sharing one name, as siblings in a region do.
	servers := map[string]*UpdateServer{}
	var infos []SMTInfo
	for i, ip := range opts.UpdateIPs {
		u, _, err := newUpdateServer(opts.UpdateServerName, cmp.Or(opts.UpdateCertValidity, leafValidity))
		if err != nil {
			return nil, err
		}
		u.SetRegCode(opts.RegCode)
		c.Updates = append(c.Updates, u)
		servers[ip] = u
		v6 := ""
		if i == 0 && c.ipv6 {
			v6 = "::1"
			if !blackhole {
				servers[v6] = u
			}
		}
		infos = append(infos, u.Info(ip, v6, azCfg.Location))
	}
	var httpsPort, httpPort int
	if opts.Listen != "" {
		u := c.Updates[0]
		if httpsPort, err = c.listenPort(opts.Ports.UpdateHTTPS, u, &u.cert); err != nil {
			return nil, err
		}
		if httpPort, err = c.listenPort(opts.Ports.UpdateHTTP, u, nil); err != nil {
			return nil, err
		}
	} else {
		var stop func()
		if httpsPort, httpPort, stop, err = ServeUpdateServers(servers); err != nil {
			return nil, err
		}
		c.stops = append(c.stops, stop)
	}
	if blackhole && c.ipv6 {
		stop, err := blackholeListener("::1", httpsPort)
		if err != nil {
			return nil, fmt.Errorf("fakecloud: ipv6-blackhole: %w", err)
		}
		c.stops = append(c.stops, stop)
	}

	regions := map[string]http.Handler{}
	for _, ip := range opts.RegionIPs {
		r := NewRegionServer(infos...)
		c.Regions = append(c.Regions, r)
		regions[ip] = r
	}
	certDir := filepath.Join(opts.Dir, "certs")
	var regionPort int
	if opts.Listen != "" {
		ip := opts.RegionIPs[0]
		cert, pemBytes, err := SelfSigned(ip)
		if err == nil {
			err = os.WriteFile(filepath.Join(certDir, ip+".pem"), pemBytes, 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("fakecloud: region server %s: %w", ip, err)
		}
		if regionPort, err = c.listenPort(opts.Ports.Region, regions[ip], &cert); err != nil {
			return nil, err
		}
	} else {
		var stop func()
		if regionPort, stop, err = ServeRegionServers(certDir, regions); err != nil {
			return nil, err
		}
		c.stops = append(c.stops, stop)
	}

	cfg := fmt.Sprintf(`[server]
api = regionInfo
certLocation = %s
regionsrv = %s

[instance]
dataProvider = /usr/bin/azuremetadata --api latest --subscriptionId --billingTag --attestedData --signature --xml
instanceArgs = msftazure
httpsOnly = true
`, certDir, strings.Join(opts.RegionIPs, ", "))
	files := map[string][]byte{
		"ca.pem":                       c.Azure.RootPEM(),
		"attestation-roots.pem":        c.Azure.RootPEM(),
		"attestation-intermediate.pem": c.Azure.IntermediatePEM(),
		"regionserverclnt.cfg":         []byte(cfg),
		"token":                        []byte(azCfg.FederatedToken),
		"access-token":                 []byte(azCfg.AccessToken), // for tests that prove it never reaches a log
		"dmi/sys_vendor":               []byte("Microsoft Corporation\n"),
		"dmi/product_name":             []byte("Virtual Machine\n"),
		"dmi/chassis_asset_tag":        []byte("7783-7084-3265-9085-8269-3286-77\n"),
	}
	offCloud := slices.Contains(opts.Faults, "off-cloud")
	if offCloud {
		files["dmi/sys_vendor"], files["dmi/product_name"], files["dmi/chassis_asset_tag"] =
			[]byte("Dell Inc.\n"), []byte("PowerEdge R650\n"), []byte("\n")
	}
	files["ca.pem"] = ca.PEM
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(opts.Dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	p := c.Azure.Plan()
	c.env = map[string]string{
		"AZURE_IMDS_ENDPOINT":        "http://" + imds,
		"GCP_METADATA_ENDPOINTS":     "http://" + imds,
		"AWS_IMDS_ENDPOINTS":         "http://" + imds,
		"AZURE_AUTHORITY_HOST":       "https://" + entra + "/",
		"ARM_ENDPOINT":               "https://" + arm,
		"AZURE_CLIENT_ID":            azCfg.ClientID,
		"AZURE_TENANT_ID":            azCfg.TenantID,
		"AZURE_FEDERATED_TOKEN_FILE": filepath.Join(opts.Dir, "token"),
		"EXTENSION_RESOURCE_ID":      azCfg.ExtensionResourceID,
		"MARKETPLACE_PUBLISHER_ID":   p.Publisher,
		"MARKETPLACE_OFFER_ID":       p.Product,
		"MARKETPLACE_PLAN_ID":        p.Name,
		"SSL_CERT_FILE":              filepath.Join(opts.Dir, "ca.pem"),
		"ATTESTATION_ROOTS_FILE":     filepath.Join(opts.Dir, "attestation-roots.pem"),
		"AIA_ALLOWED_HOSTS":          imds,
		"REGIONSRV_CONFIG":           filepath.Join(opts.Dir, "regionserverclnt.cfg"),
		"DMI_DIR_PATH":               filepath.Join(opts.Dir, "dmi"),
		"REGION_SERVER_PORT":         strconv.Itoa(regionPort),
		"UPDATE_SERVER_HTTPS_PORT":   strconv.Itoa(httpsPort),
		"UPDATE_SERVER_HTTP_PORT":    strconv.Itoa(httpPort),
		"STARTUP_SLEEP_MAX":          "0",
		"VERIFY_RETRY_BACKOFF":       "1",
	}
	if offCloud || slices.Contains(opts.Faults, "imds-restricted") {
		// The metadata endpoints point at a black hole on the same host: a
		// connect hangs until the client gives up, with no RST, as a pod's
		// SYN to 169.254.169.254 does on a node with the restriction, and
		// as a firewalled link-local address does off any cloud.
		hole, stop, err := imdsBlackhole(opts.Host)
		if err != nil {
			return nil, fmt.Errorf("fakecloud: metadata black hole: %w", err)
		}
		c.stops = append(c.stops, stop)
		for _, k := range []string{"AZURE_IMDS_ENDPOINT", "GCP_METADATA_ENDPOINTS", "AWS_IMDS_ENDPOINTS"} {
			c.env[k] = "http://" + hole
		}
	}
	if ip, err := netip.ParseAddr(opts.UpdateIPs[0]); err == nil && ip.IsLoopback() {
		// The engine refuses update servers at loopback addresses unless
		// told that this is a test; a pod's address needs no exception.
		c.env["UPDATE_SERVER_ALLOW_LOOPBACK"] = "true"
	}
	for _, name := range opts.Faults {
		if err := c.SetFault(name); err != nil {
			return nil, err
		}
	}
	var lines []string
	for k, v := range c.env {
		lines = append(lines, k+"="+v)
	}
	sort.Strings(lines)
	if err := os.WriteFile(filepath.Join(opts.Dir, "env"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return c, nil
}

// Env is the engine's environment for this cloud: every endpoint override,
// the Workload Identity variables and the Marketplace plan.
func (c *Cloud) Env() map[string]string {
	out := make(map[string]string, len(c.env))
	for k, v := range c.env {
		out[k] = v
	}
	return out
}

// Environ is Env as KEY=value strings, for exec.Cmd.Env.
func (c *Cloud) Environ() []string {
	var out []string
	for k, v := range c.env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// SetFault switches on the fault called name.
func (c *Cloud) SetFault(name string) error {
	for _, f := range Faults {
		if f.Name == name {
			return f.apply(c)
		}
	}
	return fmt.Errorf("fakecloud: unknown fault %q (known: %s)", name, strings.Join(FaultNames(), ", "))
}

// SCCRequests returns the SCC API requests of every update server, in
// order per server, the servers in the order of Updates.
func (c *Cloud) SCCRequests() []SCCRequest {
	var out []SCCRequest
	for _, u := range c.Updates {
		out = append(out, u.SCCRequests()...)
	}
	return out
}

// Stop shuts every server down.
func (c *Cloud) Stop() {
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

// serve runs h on port (0: a free one) of host, or of Options.Listen when
// set (TLS when cert is set), and returns host:port.
func (c *Cloud) serve(host string, port int, h http.Handler, cert *tls.Certificate) (string, error) {
	bind := host
	if c.opts.Listen != "" {
		bind = c.opts.Listen
	}
	l, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(port)))
	if err != nil {
		return "", fmt.Errorf("fakecloud: %w", err)
	}
	c.stops = append(c.stops, smtServe(l, h, cert))
	return net.JoinHostPort(host, strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

// listenPort runs h on port of Options.Listen and returns the port.
func (c *Cloud) listenPort(port int, h http.Handler, cert *tls.Certificate) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(c.opts.Listen, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("fakecloud: %w", err)
	}
	c.stops = append(c.stops, smtServe(l, h, cert))
	return l.Addr().(*net.TCPAddr).Port, nil
}

// adminMux adds POST /fakecloud/fault?name=X beside the IMDS routes, so a
// test or an operator can switch a fault on while the cloud runs,
// GET /fakecloud/scc-requests, the JSON list of Cloud.SCCRequests (what a
// test of rancher/scc-operator asserts on when the cloud is a process),
// GET /fakecloud/identity-token-requests, how many managed-identity token
// requests IMDS has answered ({"count":N}, for the same kind of test),
// PUT /fakecloud/federation, the federated identity credential Entra
// checks service-account tokens against from then on (a Federation), and
// GET /fakecloud/files/{name}, which serves the public files of Start
// (ca.pem, attestation-roots.pem, attestation-intermediate.pem and
// certs/<ip>.pem) to an engine that cannot read Dir, such as a pod's
// (the federated and access tokens are not served).
func (c *Cloud) adminMux(imds http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", imds)
	mux.HandleFunc("GET /fakecloud/files/{name...}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		dir, file := path.Split(name)
		public := (dir == "" && (file == "ca.pem" || strings.HasPrefix(file, "attestation-"))) ||
			(dir == "certs/" && strings.HasSuffix(file, ".pem"))
		if !public || path.Clean(name) != name {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, filepath.Join(c.opts.Dir, filepath.FromSlash(name)))
	})
	mux.HandleFunc("GET /fakecloud/scc-requests", func(w http.ResponseWriter, r *http.Request) {
		reqs := c.SCCRequests()
		if reqs == nil {
			reqs = []SCCRequest{}
		}
		writeJSON(w, http.StatusOK, reqs)
	})
	mux.HandleFunc("GET /fakecloud/identity-token-requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int32{"count": c.Azure.IdentityTokenRequests.Load()})
	})
	mux.HandleFunc("PUT /fakecloud/federation", func(w http.ResponseWriter, r *http.Request) {
		var f Federation
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.SetFederation(f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /fakecloud/fault", func(w http.ResponseWriter, r *http.Request) {
		if err := c.SetFault(r.URL.Query().Get("name")); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// acceptServiceAccount lets Entra's token endpoint take a Kubernetes
// ServiceAccount token of subject sub for the configured federated token,
// the way a federated identity credential binds an Entra application to one
// ServiceAccount. Anything else reaches Entra unchanged and fails there.
func acceptServiceAccount(entra http.Handler, sub, federatedToken string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if err := r.ParseForm(); err != nil {
				writeJSON(w, http.StatusBadRequest, entraError("invalid_request", 900144, "The request body must be a form."))
				return
			}
			if serviceAccountToken(r.PostForm.Get("client_assertion"), sub, time.Now()) {
				r.PostForm.Set("client_assertion", federatedToken)
			}
		}
		entra.ServeHTTP(w, r)
	})
}

// serviceAccountToken reports whether jwt's claims name subject sub, the
// audience api://AzureADTokenExchange and an expiry after now.
func serviceAccountToken(jwt, sub string, now time.Time) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return false
	}
	var claims struct {
		Sub string          `json:"sub"`
		Aud json.RawMessage `json:"aud"`
		Exp int64           `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Sub != sub || claims.Exp <= now.Unix() {
		return false
	}
	var auds []string
	if json.Unmarshal(claims.Aud, &auds) != nil {
		var one string
		if json.Unmarshal(claims.Aud, &one) != nil {
			return false
		}
		auds = []string{one}
	}
	return slices.Contains(auds, "api://AzureADTokenExchange")
}

// imdsBlackhole returns host:port of a black hole (see blackholeListener)
// on a port that was free a moment ago.
func imdsBlackhole(host string) (string, func(), error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	stop, err := blackholeListener(host, port)
	if err != nil {
		return "", nil, err
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), stop, nil
}
