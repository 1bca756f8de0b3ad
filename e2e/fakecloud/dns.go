package fakecloud

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSAnswer answers one question: the addresses of name (lower-case, no
// trailing dot). ok false answers NXDOMAIN, as a cluster DNS does for a name
// it has no entry for; an error answers SERVFAIL.
type DNSAnswer func(ctx context.Context, name string) (addrs []netip.Addr, ok bool, err error)

// DNSQuery is one question the server answered.
type DNSQuery struct {
	Name  string
	Type  string // A or AAAA
	Rcode string // NoError, NXDomain, ServFail
	Addrs []netip.Addr
}

// DNSServer is a DNS server on UDP 127.0.0.1 for A and AAAA questions, so
// a process that stands in for a pod can resolve names as the cluster's DNS
// would answer them. Point a resolver at Addr.
type DNSServer struct {
	// Addr is 127.0.0.1:<port>.
	Addr string

	answer DNSAnswer
	conn   net.PacketConn
	wg     sync.WaitGroup
	mu     sync.Mutex
	log    []DNSQuery
}

// NewDNSServer starts a server answering with answer. Close stops it.
func NewDNSServer(answer DNSAnswer) (*DNSServer, error) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakecloud: dns: %w", err)
	}
	s := &DNSServer{Addr: conn.LocalAddr().String(), answer: answer, conn: conn}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Close stops the server and waits for it.
func (s *DNSServer) Close() error {
	err := s.conn.Close()
	s.wg.Wait()
	return err
}

// Queries returns every question answered so far, in order.
func (s *DNSServer) Queries() []DNSQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]DNSQuery(nil), s.log...)
}

func (s *DNSServer) serve() {
	defer s.wg.Done()
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFrom(buf)
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		if out, ok := s.reply(buf[:n]); ok {
			_, _ = s.conn.WriteTo(out, from)
		}
	}
}

// reply builds the answer to one message; ok is false for what is not a
// question.
func (s *DNSServer) reply(msg []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	rec := DNSQuery{Name: name, Type: strings.TrimPrefix(q.Type.String(), "Type")}

	var answers []netip.Addr
	addrs, found, err := s.answer(context.Background(), name)
	switch {
	case err != nil:
		rh.RCode = dnsmessage.RCodeServerFailure
	case !found:
		rh.RCode = dnsmessage.RCodeNameError
	default:
		for _, a := range addrs {
			if (q.Type == dnsmessage.TypeA && a.Unmap().Is4()) || (q.Type == dnsmessage.TypeAAAA && a.Is6() && !a.Is4In6()) {
				answers = append(answers, a.Unmap())
			}
		}
	}
	rec.Rcode = strings.TrimPrefix(rh.RCode.String(), "RCode")
	rec.Addrs = answers
	s.mu.Lock()
	s.log = append(s.log, rec)
	s.mu.Unlock()

	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, false
	}
	if err := b.Question(q); err != nil {
		return nil, false
	}
	if err := b.StartAnswers(); err != nil {
		return nil, false
	}
	for _, a := range answers {
		hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 5}
		if a.Is4() {
			err = b.AResource(hdr, dnsmessage.AResource{A: a.As4()})
		} else {
			err = b.AAAAResource(hdr, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, false
		}
	}
	out, err := b.Finish()
	return out, err == nil
}
