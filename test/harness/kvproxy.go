package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// KVProxy is a reverse proxy on 127.0.0.1 in front of a Vault server. It
// forwards every request unchanged, recognises the KV v2 requests of its
// mounts, and runs a one-shot hook at the first one a test chose, before
// or after forwarding it, so that a fault (Vault stopped or sealed, the
// controller killed...) lands at a precise step of a reconcile. When Vault
// does not answer, the proxy drops the client's connection, as a stopped
// server would, instead of answering 502.
type KVProxy struct {
	// URL is the proxy's address, http://127.0.0.1:<port>: the controller's
	// backend address.
	URL string

	mounts []string
	srv    *http.Server
	rp     *httputil.ReverseProxy
	mu     sync.Mutex
	hooks  []*KVHook
	seen   []KVRequest
}

// KVKind says which part of a KV v2 path a request is for.
type KVKind string

// The parts of a KV v2 path.
const (
	KVData     KVKind = "data"     // <mount>/data/<path>: versions
	KVMetadata KVKind = "metadata" // <mount>/metadata/<path>: custom_metadata, versions' metadata
)

// KVRequest is a KV v2 request as the proxy recognised it.
type KVRequest struct {
	// Method is the HTTP method: GET, POST, PATCH, DELETE...
	Method string
	// Kind is KVData or KVMetadata.
	Kind KVKind
	// Path is <mount>/<path>, as VaultSeed's spec.path names it.
	Path string
	// CustomMetadata is the custom_metadata a metadata write carries.
	CustomMetadata map[string]string
	// Version is the version a data read asks for (?version=), 0 for the
	// latest.
	Version int
}

// Write says whether the request writes (POST, PUT or PATCH: vault/api
// sends its writes as PUT, which Vault treats as POST).
func (r KVRequest) Write() bool {
	return r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch
}

// When says when a hook runs relative to forwarding its request.
type When int

const (
	// BeforeForwarding runs the hook, then forwards the request to what
	// Vault now is (stopped, sealed...).
	BeforeForwarding When = iota
	// AfterForwarding forwards the request, runs the hook once Vault's
	// answer is in (the request has landed), then answers the client.
	AfterForwarding
)

// KVHook is a one-shot hook armed with KVProxy.Once.
type KVHook struct {
	when  When
	match func(KVRequest) bool
	fn    func(KVRequest) bool
	fired chan struct{}
}

// Fired is closed once the hook has run.
func (h *KVHook) Fired() <-chan struct{} { return h.fired }

// StartKVProxy starts a proxy to the Vault at upstream (http://host:port)
// that recognises the KV v2 requests of the given mounts. Call Close when
// done.
func StartKVProxy(upstream string, mounts ...string) (*KVProxy, error) {
	return startKVProxy(upstream, false, mounts)
}

// StartMeteringProxy is StartKVProxy keeping its connections to Vault
// alive, as a client's are: for counting the requests of a measured run
// (KVProxy.Seen) at little cost, not for faults (a connection may outlive
// a Vault restart).
func StartMeteringProxy(upstream string, mounts ...string) (*KVProxy, error) {
	return startKVProxy(upstream, true, mounts)
}

func startKVProxy(upstream string, keepAlive bool, mounts []string) (*KVProxy, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &KVProxy{URL: "http://" + l.Addr().String(), mounts: mounts}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	// A connection per request: none outlives a Vault restart, so a request
	// fails only when Vault is down at that moment.
	tr.DisableKeepAlives = !keepAlive
	tr.MaxIdleConnsPerHost = 64
	p.rp = &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: tr,
		ModifyResponse: func(resp *http.Response) error {
			if a, ok := resp.Request.Context().Value(hookKey{}).(*armed); ok && !a.run() {
				return errDropped
			}
			return nil
		},
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {
			// Vault did not answer: the client sees a broken connection.
			panic(http.ErrAbortHandler)
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ErrorLog: discardLog}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

// KVProxyForTest starts a proxy for one test and closes it when the test
// ends.
func KVProxyForTest(tb testing.TB, upstream string, mounts ...string) *KVProxy {
	tb.Helper()
	p, err := StartKVProxy(upstream, mounts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Seen returns the KV v2 requests of the proxy's mounts received so far, in
// the order they came (a hook that drops one still counts it: it was sent).
func (p *KVProxy) Seen() []KVRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// Close stops the proxy.
func (p *KVProxy) Close() { _ = p.srv.Close() }

// Once arms a hook: fn runs once, at the first KV v2 request for which
// match returns true, before or after forwarding it. fn returns false to
// drop the request, as a client killed at that moment would have: it is
// then not forwarded (BeforeForwarding) or not answered (AfterForwarding).
// fn runs while the client waits for its answer, so it must be quick (a
// controller gives up after its backend timeout): start slow recoveries in
// a goroutine.
func (p *KVProxy) Once(when When, match func(KVRequest) bool, fn func(KVRequest) bool) *KVHook {
	h := &KVHook{when: when, match: match, fn: fn, fired: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hooks = append(p.hooks, h)
	return h
}

type hookKey struct{}

// armed is a hook matched by one request, run once.
type armed struct {
	hook *KVHook
	req  KVRequest
}

func (a *armed) run() bool {
	defer close(a.hook.fired)
	return a.hook.fn(a.req)
}

func (p *KVProxy) serve(w http.ResponseWriter, r *http.Request) {
	kv, ok, err := p.recognise(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if ok {
		p.mu.Lock()
		p.seen = append(p.seen, kv)
		p.mu.Unlock()
		if a := p.take(kv); a != nil {
			if a.hook.when == BeforeForwarding {
				if !a.run() {
					panic(http.ErrAbortHandler)
				}
			} else {
				r = r.WithContext(context.WithValue(r.Context(), hookKey{}, a))
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

// take removes and returns the first hook that matches kv.
func (p *KVProxy) take(kv KVRequest) *armed {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, h := range p.hooks {
		if h.match(kv) {
			p.hooks = append(p.hooks[:i], p.hooks[i+1:]...)
			return &armed{hook: h, req: kv}
		}
	}
	return nil
}

// recognise parses /v1/<mount>/(data|metadata)/<path>, and the
// custom_metadata of a metadata write (the body is put back for
// forwarding).
func (p *KVProxy) recognise(r *http.Request) (KVRequest, bool, error) {
	for _, m := range p.mounts {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/"+m+"/")
		if !ok {
			continue
		}
		kind, path, ok := strings.Cut(rest, "/")
		if !ok || (kind != string(KVData) && kind != string(KVMetadata)) {
			return KVRequest{}, false, nil
		}
		kv := KVRequest{Method: r.Method, Kind: KVKind(kind), Path: m + "/" + path}
		if v := r.URL.Query().Get("version"); v != "" && kv.Kind == KVData {
			n, err := strconv.Atoi(v)
			if err != nil {
				return KVRequest{}, false, errors.New("the version asked for is not a number")
			}
			kv.Version = n
		}
		if kv.Kind == KVMetadata && kv.Write() && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return KVRequest{}, false, err
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var md struct {
				CustomMetadata map[string]string `json:"custom_metadata"`
			}
			if err := json.Unmarshal(body, &md); err != nil {
				return KVRequest{}, false, errors.New("the metadata write is not JSON")
			}
			kv.CustomMetadata = md.CustomMetadata
		}
		return kv, true, nil
	}
	return KVRequest{}, false, nil
}

var errDropped = errors.New("dropped by a hook")

var discardLog = log.New(io.Discard, "", 0)
