// Command dial is the NetworkPolicy steps' probe: it opens a TCP connection
// to each ADDR (host:port), or looks a NAME up through the DNS server SERVER
// (host:port) for a target lookup:NAME@SERVER, and prints one line per
// target, "TARGET connected", "TARGET resolved IP..." or "TARGET refused:
// ERROR", then exits 0. A policy that drops rather than rejects shows as a
// timeout (-timeout, 3 s). With -retry, a refused target is tried again
// until it answers or that long has passed: an enforcer learns a new pod's
// address (for a rule that selects it) only after the pod has started.
//
// With -serve-dns it is instead the steps' cluster DNS: it answers A queries
// over UDP and TCP on ADDR, each NAME=IP of -dns-answer with its IP, any
// other name with NXDOMAIN, until it is killed. The node has no DNS of its
// own (CoreDNS would need an image from a registry).
//
//	dial [-timeout D] [-retry D] ADDR|lookup:NAME@SERVER...
//	dial -serve-dns ADDR -dns-answer NAME=IP[,NAME=IP...]
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// lookupPrefix marks a target that is a name lookup rather than a TCP connection.
const lookupPrefix = "lookup:"

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "how long to wait for each connection or lookup")
	retry := flag.Duration("retry", 0, "how long to keep trying a refused target")
	serveDNS := flag.String("serve-dns", "", "serve DNS on this address (host:port) instead of probing")
	dnsAnswers := flag.String("dns-answer", "", "with -serve-dns, the A records: NAME=IP[,NAME=IP...]")
	flag.Parse()
	if *serveDNS != "" {
		answers, err := parseAnswers(*dnsAnswers)
		if err == nil {
			err = serve(*serveDNS, answers)
		}
		fmt.Fprintln(os.Stderr, "dial -serve-dns:", err)
		os.Exit(1)
	}
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dial [-timeout D] [-retry D] ADDR|lookup:NAME@SERVER...\n       dial -serve-dns ADDR -dns-answer NAME=IP[,NAME=IP...]")
		os.Exit(2)
	}
	for _, target := range flag.Args() {
		deadline := time.Now().Add(*retry)
		for {
			result, err := probe(target, *timeout)
			if err == nil {
				fmt.Printf("%s %s\n", target, result)
				break
			}
			if time.Now().After(deadline) {
				fmt.Printf("%s refused: %v\n", target, err)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// probe connects to target, or looks its name up, and says how it answered.
func probe(target string, timeout time.Duration) (string, error) {
	lookup, ok := strings.CutPrefix(target, lookupPrefix)
	if !ok {
		c, err := net.DialTimeout("tcp", target, timeout)
		if err != nil {
			return "", err
		}
		c.Close()
		return "connected", nil
	}
	name, server, ok := strings.Cut(lookup, "@")
	if !ok {
		return "", fmt.Errorf("%q: want lookup:NAME@SERVER", target)
	}
	// The Go resolver, sent to server whatever the pod's resolv.conf names:
	// the query goes over UDP as a resolver's does (TCP only when truncated).
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ips, err := r.LookupNetIP(ctx, "ip4", name)
	if err != nil {
		return "", err
	}
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return "resolved " + strings.Join(s, ","), nil
}

func parseAnswers(spec string) (map[string]netip.Addr, error) {
	out := map[string]netip.Addr{}
	for _, kv := range strings.Split(spec, ",") {
		name, ip, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-dns-answer %q: want NAME=IP", kv)
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil || !addr.Is4() {
			return nil, fmt.Errorf("-dns-answer %q: %s is not an IPv4 address", kv, ip)
		}
		out[canonical(name)] = addr
	}
	return out, nil
}

// canonical is a name as a question carries it: lower case, fully qualified.
func canonical(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// serve answers DNS queries on addr over UDP and TCP (a DNS server must
// answer both; the policy opens both).
func serve(addr string, answers map[string]netip.Addr) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				errc <- err
				return
			}
			if resp, err := answer(buf[:n], answers); err == nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				errc <- err
				return
			}
			go serveTCP(c, answers)
		}
	}()
	return <-errc
}

// serveTCP answers the length-prefixed queries of one connection.
func serveTCP(c net.Conn, answers map[string]netip.Addr) {
	defer c.Close()
	for {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var n uint16
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return
		}
		req := make([]byte, n)
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		resp, err := answer(req, answers)
		if err != nil {
			return
		}
		if _, err := c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp)))); err != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// answer builds the response to one query: the A record of a known name,
// no record for its other types, NXDOMAIN for any other name.
func answer(req []byte, answers map[string]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	if h.Response {
		return nil, errors.New("not a query")
	}
	ip, known := answers[canonical(q.Name.String())]
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if known && q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		if err := b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET}, dnsmessage.AResource{A: ip.As4()}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}
