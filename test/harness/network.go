package harness

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// ServiceNetwork is the cluster network as the API server sees it, on
// loopback. The API server reaches webhooks (and every other in-cluster
// Service) through its "cluster" egress selector; the harness points that
// selector at an HTTP CONNECT proxy on a Unix socket (the protocol of
// Konnectivity's proxy), and the proxy forwards a connection to a Service
// address (ClusterIP:port, allocated by the API server as usual) to one of
// the local processes routed to it, as kube-proxy would to a ready
// endpoint. The API server keeps resolving the Service by its name and
// verifies the serving certificate for <service>.<namespace>.svc: only the
// last hop differs from a cluster.
type ServiceNetwork struct {
	dir    string
	socket string
	ln     net.Listener

	mu     sync.Mutex
	routes map[string][]string // Service address -> backends (host:port)
	next   map[string]int
	wg     sync.WaitGroup
}

// NewServiceNetwork starts the proxy. Close stops it.
func NewServiceNetwork() (*ServiceNetwork, error) {
	// A short directory: a Unix socket path has at most 107 bytes.
	dir, err := os.MkdirTemp("", "ohmlab-net-")
	if err != nil {
		return nil, err
	}
	n := &ServiceNetwork{dir: dir, socket: filepath.Join(dir, "proxy.sock"), routes: map[string][]string{}, next: map[string]int{}}
	if n.ln, err = net.Listen("unix", n.socket); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	n.wg.Add(1)
	go n.serve()
	return n, nil
}

// EgressSelectorConfig writes the API server's egress selector
// configuration (--egress-selector-config-file) and returns its path.
func (n *ServiceNetwork) EgressSelectorConfig() (string, error) {
	cfg := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: %s
`, n.socket)
	path := filepath.Join(n.dir, "egress-selector.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// AddBackend routes connections to a Service address (ClusterIP:port) to
// backend (a loopback host:port) too, as a new ready endpoint would.
func (n *ServiceNetwork) AddBackend(service, backend string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !slices.Contains(n.routes[service], backend) {
		n.routes[service] = append(n.routes[service], backend)
	}
}

// RemoveBackend stops routing to backend, as when its pod stops being a
// ready endpoint.
func (n *ServiceNetwork) RemoveBackend(service, backend string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.routes[service] = slices.DeleteFunc(n.routes[service], func(b string) bool { return b == backend })
}

// Backends returns the backends of a Service address.
func (n *ServiceNetwork) Backends(service string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.routes[service])
}

// pick returns the next backend of a Service address, round robin.
func (n *ServiceNetwork) pick(service string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	bs := n.routes[service]
	if len(bs) == 0 {
		return "", false
	}
	i := n.next[service] % len(bs)
	n.next[service] = i + 1
	return bs[i], true
}

// Close stops the proxy and removes its socket.
func (n *ServiceNetwork) Close() {
	_ = n.ln.Close()
	n.wg.Wait()
	_ = os.RemoveAll(n.dir)
}

func (n *ServiceNetwork) serve() {
	defer n.wg.Done()
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			return
		}
		go n.tunnel(conn)
	}
}

// tunnel answers one CONNECT and copies bytes both ways.
func (n *ServiceNetwork) tunnel(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(conn, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	backend, ok := n.pick(req.Host)
	if !ok {
		fmt.Fprintf(conn, "HTTP/1.1 503 Service Unavailable\r\n\r\nno endpoint for %s\n", req.Host)
		return
	}
	up, err := net.Dial("tcp", backend)
	if err != nil {
		fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\n\r\n%v\n", err)
		return
	}
	defer up.Close()
	if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); closeWrite(up); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); closeWrite(conn); done <- struct{}{} }()
	<-done
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}
