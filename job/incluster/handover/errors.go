package handover

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/rancher/registration-engine/job/escape"
)

// ErrNotReady means the update server was not yet reachable the way the
// operator will reach it when the wait ended. Transient: CoreDNS may serve
// the entry on the next run. Returned as a *NotReadyError.
var ErrNotReady = errors.New("update server not reachable through the cluster yet")

// ErrShadowed means a search-domain name answers before the update
// server's own name: a pod's resolver (ndots:5) tries
// <name>.<search domain> first, so a Service a tenant creates (susecloud in
// a namespace named net answers smt-azure.susecloud.net.svc.cluster.local)
// takes the operator to the tenant's pod. Permanent: no wait helps until a
// person removes that Service. Returned as a *ShadowedError.
var ErrShadowed = errors.New("the update server's name is shadowed in the cluster")

// Steps of the check, in the order the operator takes them.
const (
	// StepResolve: the name did not resolve to the mapped address.
	StepResolve = "resolve"
	// StepTLS: the address did not answer TLS with the pinned certificate.
	StepTLS = "tls"
)

// NotReadyError says what had not happened yet when the wait ended: which
// name, in which CoreDNS object, and the last answer or error.
type NotReadyError struct {
	// Name is the update server's name; Address the address it must
	// resolve to; Port the TLS port dialed.
	Name    string
	Address netip.Addr
	Port    int
	// Object is the CoreDNS object holding the entry, e.g.
	// kube-system/coredns; "" when unknown.
	Object string
	// Step is StepResolve or StepTLS: the first check that failed last.
	Step string
	// Server is the CoreDNS replica (address:port) whose answer failed the
	// last check; "" when the cluster's DNS Service's did.
	Server string
	// Answer is the last DNS answer (empty when the lookup failed).
	Answer []netip.Addr
	// Err is the last lookup or TLS error; nil when the name resolved
	// elsewhere.
	Err error
	// Passing is how long every check had been passing when the wait
	// ended, short of Settle; 0 when the last check failed.
	Passing, Settle time.Duration
	// Waited is how long the wait lasted; Attempts how many checks it made.
	Waited   time.Duration
	Attempts int
}

func (e *NotReadyError) Error() string {
	var b strings.Builder
	entry := ""
	if e.Object != "" {
		entry = " (entry in " + e.Object + ")"
	}
	switch {
	case e.Passing > 0:
		fmt.Fprintf(&b, "%s: %s resolves to %s through the cluster's DNS%s and answers TLS there, but every check has passed only for the last %s of the %s they must (HANDOVER_SETTLE) before the Secret is written; the wait (HANDOVER_TIMEOUT, within RUN_DEADLINE) ended first",
			ErrNotReady, e.Name, e.Address, entry, e.Passing.Round(time.Millisecond), e.Settle)
	case e.Step == StepTLS:
		fmt.Fprintf(&b, "%s: %s resolves to %s through the cluster's DNS%s, but %s does not answer TLS with the pinned certificate",
			ErrNotReady, e.Name, e.Address, entry, net.JoinHostPort(e.Address.String(), strconv.Itoa(e.Port)))
	case e.Server != "":
		fmt.Fprintf(&b, "%s: %s does not resolve to %s at CoreDNS replica %s, one of the pods behind the cluster's DNS%s",
			ErrNotReady, e.Name, e.Address, e.Server, entry)
	default:
		fmt.Fprintf(&b, "%s: %s does not resolve to %s through the cluster's DNS%s", ErrNotReady, e.Name, e.Address, entry)
	}
	fmt.Fprintf(&b, " after %s and %d checks", e.Waited.Round(time.Millisecond), e.Attempts)
	switch {
	case e.Passing > 0:
		// The last answer was right; an older failure would mislead.
	case e.Err != nil:
		fmt.Fprintf(&b, "; last error: %v", e.Err)
	case e.Step == StepResolve:
		fmt.Fprintf(&b, "; last answer: %s", answerString(e.Answer))
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotReady) true.
func (e *NotReadyError) Is(target error) bool { return target == ErrNotReady }

// ShadowedError names the search-domain name that answered for the update
// server's name, and the Service behind it when the name tells.
type ShadowedError struct {
	// Name is the update server's name, Address what it must resolve to.
	Name    string
	Address netip.Addr
	// SearchName is the name with the search domain that answered
	// (without the trailing dot); Answer its addresses.
	SearchName string
	Answer     []netip.Addr
	// Absolute is the answer for the name itself (Name + "."); AbsoluteErr
	// its error, if any.
	Absolute    []netip.Addr
	AbsoluteErr error
	// Service and Namespace are the Service behind SearchName when it has
	// the form [<host>.]<service>.<namespace>.svc.<cluster domain>; Host
	// the pod's hostname of a headless Service; all "" otherwise.
	Service, Namespace, Host string
}

func (e *ShadowedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: a pod's resolver tries its search domains before the name itself (ndots:5), and %s answers %s", ErrShadowed, e.SearchName, answerString(e.Answer))
	if e.Service != "" {
		if e.Host != "" {
			fmt.Fprintf(&b, " (pod %s of the headless Service %s in namespace %s)", e.Host, e.Service, e.Namespace)
		} else {
			fmt.Fprintf(&b, " (Service %s in namespace %s)", e.Service, e.Namespace)
		}
	}
	if e.AbsoluteErr != nil {
		fmt.Fprintf(&b, ", while %s. does not resolve (%v)", e.Name, e.AbsoluteErr)
	} else {
		fmt.Fprintf(&b, ", while %s. resolves to %s", e.Name, answerString(e.Absolute))
	}
	fmt.Fprintf(&b, "; rancher/scc-operator would connect to the former instead of the update server at %s. ", e.Address)
	if e.Service != "" {
		fmt.Fprintf(&b, "Remove or rename that Service (kubectl -n %s delete service %s) or the namespace %s, then run the engine again", escape.Shell(e.Namespace), escape.Shell(e.Service), e.Namespace)
	} else {
		fmt.Fprintf(&b, "Remove the record behind %s, then run the engine again", e.SearchName)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrShadowed) true.
func (e *ShadowedError) Is(target error) bool { return target == ErrShadowed }

// Unwrap returns the last lookup or TLS error.
func (e *NotReadyError) Unwrap() error { return e.Err }

// serverString names the DNS server a check asked.
func serverString(server string) string {
	if server == "" {
		return "the cluster's DNS Service"
	}
	return "CoreDNS replica " + server
}

func answerString(addrs []netip.Addr) string {
	if len(addrs) == 0 {
		return "no address"
	}
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return "[" + strings.Join(s, " ") + "]"
}
