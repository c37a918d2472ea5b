package vaultkv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	vaultapi "github.com/hashicorp/vault/api"
	"golang.org/x/time/rate"
)

// Authentication methods (AuthConfig.Method).
const (
	// MethodKubernetes logs in at auth/<Mount>/login with a
	// ServiceAccount token read from AuthConfig.TokenFile (projected) or
	// given by AuthConfig.TokenSource.
	MethodKubernetes = "kubernetes"
	// MethodToken uses a static Vault token (demo and tests).
	MethodToken = "token"
)

// DefaultTimeout is Config.Timeout when it is zero.
const DefaultTimeout = 10 * time.Second

// AuthConfig says how the client gets its Vault token. It comes from the
// controller's configuration, never from a VaultSeed.
type AuthConfig struct {
	// Method is MethodKubernetes or MethodToken.
	Method string
	// Mount is the Kubernetes auth method's mount path; "" means
	// "kubernetes".
	Mount string
	// Role is the Kubernetes auth role to log in with.
	Role string
	// Audience is informational: the projected token carries it (the
	// kubelet sets it) and the Vault role checks it.
	Audience string
	// TokenFile is, for MethodKubernetes, the projected ServiceAccount
	// token file, read again at each login (the kubelet rotates it); for
	// MethodToken, a file holding the Vault token, read at first use and
	// again after Vault rejected the token.
	TokenFile string
	// Token is the static Vault token of MethodToken when TokenFile is
	// empty. Kept in memory only.
	Token string
	// TokenSource, for MethodKubernetes instead of TokenFile, returns a
	// ServiceAccount token at each login: the caller mints it (for
	// example with the TokenRequest API), so that this package needs no
	// Kubernetes client. An *Error it returns keeps its class (a
	// ServiceAccount that no longer exists is ClassForbidden); any other
	// error is ClassUnavailable.
	TokenSource func(ctx context.Context) (string, error)
}

// Config configures a Client. It comes from the controller's
// configuration, never from a VaultSeed.
type Config struct {
	// Address is Vault's URL, for example https://vault.vault:8200.
	Address string
	// CAFile is a PEM bundle of the CAs to trust; "" means the system's.
	CAFile string
	// TLSServerName, when set, is the name checked in Vault's certificate.
	TLSServerName string
	// Timeout bounds each HTTP request, connecting included; 0 means
	// DefaultTimeout. Vault being unreachable is reported (ClassUnavailable)
	// within it: at once for a refused connection. No request is retried
	// by the client except once after a new login (see Client).
	Timeout time.Duration
	// QPS and Burst are the client-side rate limit on HTTP requests, logins
	// included; QPS <= 0 means no limit, Burst < 1 means 1.
	QPS   float64
	Burst int
	// Limiter, when set, replaces QPS and Burst: clients that share it
	// share one limit (the per-tenant clients of one process and its own).
	Limiter *rate.Limiter
	// Auth says how to get a Vault token.
	Auth AuthConfig
	// Target is the metrics' target label; "" means "vault".
	Target string
	// Metrics receives one observation per operation; nil means none.
	Metrics *Metrics
	// Logger receives login events (V(1)) and token rejections; the zero
	// Logger discards them. Nothing logged carries a value or token.
	Logger logr.Logger
}

// Client is the KV implementation over a real Vault. It is safe for
// concurrent use.
//
// It logs in lazily, at the first request. A token with a TTL is replaced
// by a new login once two thirds of its TTL have passed, before the next
// request that needs it: one login per token lifetime, never one per
// request, and no request is sent with a token about to expire. When that
// login fails, the current token is used until it expires and the login is
// tried again at each request. When Vault
// answers 403 "invalid token" (revoked or expired early), the client logs
// in again once and retries the request once; a second refusal is returned
// as ClassForbidden. The Vault token is kept in memory only.
type Client struct {
	api     *vaultapi.Client
	auth    AuthConfig
	timeout time.Duration
	limiter *rate.Limiter
	target  string
	metrics *Metrics
	log     logr.Logger
	now     func() time.Time

	mu        sync.Mutex // serialises logins; guards the fields below
	gen       int        // generation of the current token, 0 before the first
	refreshAt time.Time  // when to replace the token; zero: never
	expiresAt time.Time  // when Vault expires it, if refreshAt is set
	logins    int
}

var _ KV = (*Client)(nil)

// New checks cfg and builds a Client. It sends nothing: the first request
// logs in. Errors are of class ClassInvalid.
func New(cfg Config) (*Client, error) {
	invalid := func(format string, args ...any) error {
		return &Error{Op: "configure", Path: cfg.Address, Class: ClassInvalid, Reason: fmt.Sprintf(format, args...)}
	}
	if err := cfg.defaults(invalid); err != nil {
		return nil, err
	}
	api, err := newAPIClient(cfg, invalid)
	if err != nil {
		return nil, err
	}
	limit := rate.Inf
	if cfg.QPS > 0 {
		limit = rate.Limit(cfg.QPS)
	}
	limiter := cfg.Limiter
	if limiter == nil {
		limiter = rate.NewLimiter(limit, max(cfg.Burst, 1))
	}
	log := cfg.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &Client{
		api:     api,
		auth:    cfg.Auth,
		timeout: cfg.Timeout,
		limiter: limiter,
		target:  cfg.Target,
		metrics: cfg.Metrics,
		log:     log,
		now:     time.Now,
	}, nil
}

// defaults checks cfg and fills in its defaults.
func (cfg *Config) defaults(invalid func(format string, args ...any) error) error {
	if cfg.Address == "" {
		return invalid("no Vault address")
	}
	switch cfg.Auth.Method {
	case MethodKubernetes:
		if cfg.Auth.Role == "" || (cfg.Auth.TokenFile == "") == (cfg.Auth.TokenSource == nil) {
			return invalid("kubernetes auth needs a role and exactly one of a token file and a token source")
		}
		if cfg.Auth.Mount == "" {
			cfg.Auth.Mount = "kubernetes"
		}
	case MethodToken:
		if (cfg.Auth.Token == "") == (cfg.Auth.TokenFile == "") {
			return invalid("token auth needs exactly one of a token and a token file")
		}
	default:
		return invalid("auth method %q is not %q or %q", cfg.Auth.Method, MethodKubernetes, MethodToken)
	}
	if cfg.Timeout < 0 || cfg.QPS < 0 || math.IsNaN(cfg.QPS) {
		return invalid("timeout and qps must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Target == "" {
		cfg.Target = "vault"
	}
	return nil
}

// newAPIClient is vault/api's client for cfg, over a transport of its own.
func newAPIClient(cfg Config, invalid func(format string, args ...any) error) (*vaultapi.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cfg.TLSServerName}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, invalid("reading the CA bundle: %v", err)
		}
		tlsCfg.RootCAs = x509.NewCertPool()
		if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalid("no PEM certificate in the CA bundle %s", cfg.CAFile)
		}
	}
	// Our own transport, so that no VAULT_* environment variable (for
	// example VAULT_SKIP_VERIFY) changes how Vault is reached.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = cfg.Timeout
	tr.TLSClientConfig = tlsCfg
	hc := &http.Client{
		Transport: tr,
		// vault/api follows one redirect itself, refusing a downgrade.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	api, err := vaultapi.NewClient(&vaultapi.Config{
		Address:    cfg.Address,
		HttpClient: hc,
		Timeout:    cfg.Timeout,
		MaxRetries: 0, // the reconciler backs off; a retry here only delays Unavailable
	})
	if err != nil {
		return nil, invalid("%v", err)
	}
	// Nothing from VAULT_TOKEN, VAULT_NAMESPACE or VAULT_WRAP_TTL: the
	// configuration decides.
	api.ClearToken()
	api.ClearNamespace()
	api.SetWrappingLookupFunc(func(string, string) string { return "" })
	return api, nil
}

// Logins returns how many Vault tokens the client has obtained so far:
// successful logins for MethodKubernetes, token loads for MethodToken.
func (c *Client) Logins() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logins
}

// Read implements KV.Read with GET <mount>/data/<rest>. A 404 without
// metadata is an absent path; a 404 with metadata is a deleted or destroyed
// latest version (Vault's own verdict, so a deletion_time in the future set
// by delete_version_after does not count); a 404 with error messages (for
// example no such mount) is ClassNotFound.
func (c *Client) Read(ctx context.Context, path string) (*Secret, error) {
	return c.read(ctx, path, 0)
}

// ReadVersion implements KV.ReadVersion with GET
// <mount>/data/<rest>?version=<version>, answered as Read is.
func (c *Client) ReadVersion(ctx context.Context, path string, version int) (*Secret, error) {
	if version < 1 {
		return nil, c.refuse(OpRead, path, fmt.Errorf("version %d is not positive", version))
	}
	return c.read(ctx, path, version)
}

// read reads the latest version (0) or the given one.
func (c *Client) read(ctx context.Context, path string, version int) (*Secret, error) {
	mount, rest, err := SplitPath(path)
	if err != nil {
		return nil, c.refuse(OpRead, path, err)
	}
	var query map[string][]string
	if version > 0 {
		query = map[string][]string{"version": {strconv.Itoa(version)}}
	}
	return c.get(ctx, path, func(ctx context.Context) (*vaultapi.Response, error) {
		return c.api.Logical().ReadRawWithDataWithContext(ctx, mount+"/data/"+rest, query)
	}, parseRead, ClassOf)
}

// get sends one read request and decodes its body with parse, which is
// told whether Vault answered 404 (a body parse finds nothing in is the
// request's error). code names its outcome in the metrics.
func (c *Client) get(ctx context.Context, path string, send func(context.Context) (*vaultapi.Response, error), parse func(io.Reader, bool) (*Secret, error), code func(error) string) (*Secret, error) {
	var s *Secret
	err := c.doAs(ctx, OpRead, path, code, func(ctx context.Context) error {
		return c.request(ctx, OpRead, path, func(ctx context.Context) error {
			resp, err := send(ctx)
			if resp != nil {
				defer resp.Body.Close()
			}
			if resp != nil && resp.StatusCode == http.StatusNotFound {
				found, perr := parse(resp.Body, true)
				if perr != nil || found == nil {
					return errors.Join(err, perr)
				}
				s = found
				return nil
			}
			if err != nil {
				return err
			}
			s, err = parse(resp.Body, false)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ReadNew implements KV.ReadNew with GET <mount>/metadata/<rest>, then,
// when the path has a version, Read. A 404 without error messages is a
// path without metadata; a 404 with them (no such mount) is ClassNotFound.
// A token whose policy does not grant read on the metadata (a policy older
// than the chart's vault/policy.hcl) gets 403 there: the path is then read
// as Read does, without NoMetadata, so that the marker is merged, never
// replacing anyone's custom_metadata. That 403 is counted as
// metadata_refused, not forbidden: nothing fails, and the data read that
// follows counts a real refusal.
func (c *Client) ReadNew(ctx context.Context, path string) (*Secret, error) {
	mount, rest, err := SplitPath(path)
	if err != nil {
		return nil, c.refuse(OpRead, path, err)
	}
	s, err := c.get(ctx, path, func(ctx context.Context) (*vaultapi.Response, error) {
		return c.api.Logical().ReadRawWithContext(ctx, mount+"/metadata/"+rest)
	}, parseMetadata, metadataReadCode)
	switch {
	case errors.Is(err, ErrForbidden):
		return c.read(ctx, path, 0)
	case err != nil:
		return nil, err
	case s == nil: // metadata with a version: read it
		return c.read(ctx, path, 0)
	}
	return s, nil
}

// metadataResponse is the part of GET <mount>/metadata/<rest> that ReadNew
// uses.
type metadataResponse struct {
	Errors []string `json:"errors"`
	Data   *struct {
		CurrentVersion int               `json:"current_version"`
		CustomMetadata map[string]string `json:"custom_metadata"`
	} `json:"data"`
}

// parseMetadata decodes a metadata read's body: an absent Secret with
// NoMetadata for Vault's 404 `{"errors":[]}`, an absent Secret with its
// custom_metadata for metadata without a version, nil for metadata with a
// version, or, for a 404 with error messages, nil and no error.
func parseMetadata(body io.Reader, notFound bool) (*Secret, error) {
	var r metadataResponse
	if err := json.NewDecoder(body).Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the answer is empty, not Vault's: check the address")
		}
		return nil, fmt.Errorf("decoding Vault's answer: %w", err)
	}
	switch {
	case notFound && len(r.Errors) == 0:
		return &Secret{NoMetadata: true}, nil
	case notFound:
		return nil, nil
	case r.Data == nil:
		return nil, errors.New("Vault's answer has no metadata")
	case r.Data.CurrentVersion > 0:
		return nil, nil
	}
	s := &Secret{}
	if len(r.Data.CustomMetadata) > 0 {
		s.CustomMetadata = r.Data.CustomMetadata
	}
	return s, nil
}

// readResponse is the part of GET <mount>/data/<rest> that Read uses.
type readResponse struct {
	Errors []string `json:"errors"`
	Data   *struct {
		Data     map[string]any `json:"data"`
		Metadata *struct {
			Version        int               `json:"version"`
			CreatedTime    string            `json:"created_time"`
			Destroyed      bool              `json:"destroyed"`
			CustomMetadata map[string]string `json:"custom_metadata"`
		} `json:"metadata"`
	} `json:"data"`
}

// parseRead decodes a read's body. For a 404 it returns an absent Secret
// (Vault's `{"errors":[]}`), a deleted one (metadata), or nil when Vault
// sent error messages. An empty 404 is not Vault's: a wrong address behind a
// proxy would otherwise read every path as absent.
func parseRead(body io.Reader, notFound bool) (*Secret, error) {
	var r readResponse
	dec := json.NewDecoder(body)
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the answer is empty, not Vault's: check the address")
		}
		return nil, fmt.Errorf("decoding Vault's answer: %w", err)
	}
	if r.Data == nil || r.Data.Metadata == nil {
		if notFound && len(r.Errors) == 0 {
			return &Secret{}, nil
		}
		if notFound {
			return nil, nil
		}
		return nil, errors.New("Vault's answer has no metadata")
	}
	md := r.Data.Metadata
	s := &Secret{Exists: true, Version: md.Version}
	if md.CreatedTime != "" {
		created, err := time.Parse(time.RFC3339Nano, md.CreatedTime)
		if err != nil {
			return nil, fmt.Errorf("decoding the created_time of version %d: %w", md.Version, err)
		}
		s.Created = created
	}
	if len(md.CustomMetadata) > 0 {
		s.CustomMetadata = md.CustomMetadata
	}
	if notFound || md.Destroyed || r.Data.Data == nil {
		s.Deleted = true
		return s, nil
	}
	s.Data = r.Data.Data
	return s, nil
}

// Write implements KV.Write with POST <mount>/data/<rest> and options.cas,
// which also satisfies mounts and paths with cas_required. A nil data is
// written as an empty tree; cas must not be negative.
func (c *Client) Write(ctx context.Context, path string, data map[string]any, cas int) (Written, error) {
	mount, rest, err := SplitPath(path)
	if err == nil && cas < 0 {
		err = fmt.Errorf("cas %d is negative", cas)
	}
	if err != nil {
		return Written{}, c.refuse(OpWrite, path, err)
	}
	if data == nil {
		data = map[string]any{}
	}
	var written Written
	err = c.do(ctx, OpWrite, path, func(ctx context.Context) error {
		return c.request(ctx, OpWrite, path, func(ctx context.Context) error {
			s, err := c.api.KVv2(mount).Put(ctx, rest, data, vaultapi.WithCheckAndSet(cas))
			if err != nil {
				return err
			}
			if s.VersionMetadata == nil || s.VersionMetadata.Version == 0 {
				return errors.New("Vault's answer has no version")
			}
			written = Written{Version: s.VersionMetadata.Version, Created: s.VersionMetadata.CreatedTime}
			return nil
		})
	})
	if err != nil {
		return Written{}, err
	}
	return written, nil
}

// Mark implements KV.Mark with PATCH <mount>/metadata/<rest> (a JSON merge
// patch of custom_metadata only, KVv2.PatchMetadata). When the path has no metadata yet (404)
// it creates it with POST <mount>/metadata/<rest> carrying custom_metadata
// only; a concurrent creation of the same path's metadata by someone else
// between the two requests would lose their keys. An empty metadata sends
// nothing. Metadata over Vault's limits is refused before sending
// (ClassInvalid, see ValidateMetadata).
func (c *Client) Mark(ctx context.Context, path string, metadata map[string]string) error {
	mount, rest, err := SplitPath(path)
	if err == nil {
		err = ValidateMetadata(metadata)
	}
	if err != nil {
		return c.refuse(OpMark, path, err)
	}
	if len(metadata) == 0 {
		return nil
	}
	patch := make(map[string]any, len(metadata))
	for k, v := range metadata {
		patch[k] = v
	}
	return c.do(ctx, OpMark, path, func(ctx context.Context) error {
		err := c.request(ctx, OpMark, path, func(ctx context.Context) error {
			return c.api.KVv2(mount).PatchMetadata(ctx, rest, vaultapi.KVMetadataPatchInput{CustomMetadata: patch})
		})
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusNotFound {
			return err
		}
		return c.request(ctx, OpMark, path, func(ctx context.Context) error {
			return c.createMetadata(ctx, mount, rest, metadata)
		})
	})
}

// MarkNew implements KV.MarkNew with POST <mount>/metadata/<rest> carrying
// custom_metadata only (Mark's creation, without its merge first): for a
// path ReadNew found without metadata.
func (c *Client) MarkNew(ctx context.Context, path string, metadata map[string]string) error {
	mount, rest, err := SplitPath(path)
	if err == nil {
		err = ValidateMetadata(metadata)
	}
	if err != nil {
		return c.refuse(OpMark, path, err)
	}
	if len(metadata) == 0 {
		return nil
	}
	return c.do(ctx, OpMark, path, func(ctx context.Context) error {
		return c.request(ctx, OpMark, path, func(ctx context.Context) error {
			return c.createMetadata(ctx, mount, rest, metadata)
		})
	})
}

// createMetadata sets custom_metadata with POST <mount>/metadata/<rest>,
// leaving the path's other metadata settings alone.
func (c *Client) createMetadata(ctx context.Context, mount, rest string, metadata map[string]string) error {
	md := make(map[string]any, len(metadata))
	for k, v := range metadata {
		md[k] = v
	}
	// Not KVv2.PutMetadata: it would also reset max_versions,
	// cas_required and delete_version_after.
	_, err := c.api.Logical().WriteWithContext(ctx, mount+"/metadata/"+rest, map[string]any{"custom_metadata": md})
	return err
}

// Delete implements KV.Delete with DELETE <mount>/metadata/<rest>.
func (c *Client) Delete(ctx context.Context, path string) error {
	mount, rest, err := SplitPath(path)
	if err != nil {
		return c.refuse(OpDelete, path, err)
	}
	return c.do(ctx, OpDelete, path, func(ctx context.Context) error {
		return c.request(ctx, OpDelete, path, func(ctx context.Context) error {
			return c.api.KVv2(mount).DeleteMetadata(ctx, rest)
		})
	})
}

// metadataReadCode is the metrics code of ReadNew's metadata read: its own
// refusal is the fallback of a policy without read on metadata
// (codeMetadataRefused); a refused login stays forbidden.
func metadataReadCode(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Class == ClassForbidden && e.Op == OpRead {
		return codeMetadataRefused
	}
	return ClassOf(err)
}

// refuse reports a call refused before sending, as ClassInvalid.
func (c *Client) refuse(op, path string, err error) error {
	e := &Error{Op: op, Path: path, Class: ClassInvalid, Reason: err.Error()}
	c.metrics.observe(c.target, op, ClassOf(e), 0)
	return e
}

// do runs one operation: it makes sure a token is there, runs send, and
// after a 403 "invalid token" logs in again and runs send once more. It
// records the outcome in the metrics.
func (c *Client) do(ctx context.Context, op, path string, send func(context.Context) error) error {
	return c.doAs(ctx, op, path, ClassOf, send)
}

// doAs is do, with code naming the outcome in the metrics.
func (c *Client) doAs(ctx context.Context, op, path string, code func(error) string, send func(context.Context) error) error {
	start := time.Now()
	err := c.withToken(ctx, op, path, send)
	c.metrics.observe(c.target, op, code(err), time.Since(start))
	return err
}

func (c *Client) withToken(ctx context.Context, op, path string, send func(context.Context) error) error {
	gen, err := c.token(ctx)
	if err != nil {
		return err
	}
	err = send(ctx)
	var e *Error
	if !errors.As(err, &e) || !tokenRejected(e) {
		return err
	}
	c.log.Info("Vault rejected the client token, logging in again", "operation", op, "path", path, "reason", e.Reason)
	if err := c.replaceToken(ctx, gen); err != nil {
		return err
	}
	return send(ctx)
}

// request sends one HTTP request (fn) after the rate limiter, bounded by
// the configured timeout, and classifies its error.
func (c *Client) request(ctx context.Context, op, path string, fn func(context.Context) error) error {
	if err := c.limiter.Wait(ctx); err != nil {
		// The limiter refuses at once a wait that would outlast the
		// deadline: the caller's time ran out, as for a timeout.
		_, deadline := ctx.Deadline()
		return &Error{Op: op, Path: path, Class: ClassUnavailable, Reason: "client-side rate limit: " + err.Error(), TimedOut: deadline}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := fn(ctx); err != nil {
		return classify(op, path, err)
	}
	return nil
}

// token returns the generation of a usable token, obtaining one first when
// there is none yet or the current one is due for replacement.
func (c *Client) token(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen > 0 && (c.refreshAt.IsZero() || c.now().Before(c.refreshAt)) {
		return c.gen, nil
	}
	why := "first request"
	if c.gen > 0 {
		why = "token two-thirds through its TTL"
	}
	if err := c.obtain(ctx, why); err != nil {
		if c.gen == 0 || !c.now().Before(c.expiresAt) {
			return 0, err
		}
		// The current token still works: use it, and try again at the next
		// request rather than fail this one.
		c.log.Info("Could not replace the Vault token yet, using it until it expires", "reason", err.Error(), "expiresAt", c.expiresAt)
	}
	return c.gen, nil
}

// replaceToken obtains a new token after Vault rejected generation gen,
// unless another request already replaced it.
func (c *Client) replaceToken(ctx context.Context, gen int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return nil
	}
	return c.obtain(ctx, "token rejected")
}

// obtain gets a new token; c.mu is held.
func (c *Client) obtain(ctx context.Context, why string) error {
	if c.auth.Method == MethodToken {
		tok := c.auth.Token
		if c.auth.TokenFile != "" {
			b, err := os.ReadFile(c.auth.TokenFile)
			if err != nil {
				return &Error{Op: OpLogin, Path: c.auth.TokenFile, Class: ClassUnavailable, Reason: err.Error()}
			}
			tok = strings.TrimSpace(string(b))
		}
		c.api.SetToken(tok)
		c.gen++
		c.logins++
		c.log.V(1).Info("Loaded the Vault token", "method", MethodToken, "why", why)
		return nil
	}

	loginPath := "auth/" + c.auth.Mount + "/login"
	start, sent := time.Now(), c.now()
	tok, ttl, err := c.login(ctx, loginPath)
	c.metrics.observe(c.target, OpLogin, ClassOf(err), time.Since(start))
	if err != nil {
		return err
	}
	c.api.SetToken(tok)
	c.gen++
	c.logins++
	c.refreshAt, c.expiresAt = time.Time{}, time.Time{}
	if ttl > 0 { // counted from before the login was sent
		c.refreshAt, c.expiresAt = sent.Add(ttl*2/3), sent.Add(ttl)
	}
	c.log.V(1).Info("Logged in to Vault", "method", MethodKubernetes, "mount", c.auth.Mount, "role", c.auth.Role, "why", why, "ttl", ttl.String())
	return nil
}

// login sends the Kubernetes auth login and returns the Vault token and
// its TTL (0: none).
func (c *Client) login(ctx context.Context, loginPath string) (string, time.Duration, error) {
	jwt, err := c.serviceAccountToken(ctx, loginPath)
	if err != nil {
		return "", 0, err
	}
	var auth *vaultapi.SecretAuth
	err = c.request(ctx, OpLogin, loginPath, func(ctx context.Context) error {
		r := c.api.NewRequest(http.MethodPut, "/v1/"+loginPath)
		r.ClientToken = "" // a login carries no token, least of all a stale one
		if err := r.SetJSONBody(map[string]any{"role": c.auth.Role, "jwt": jwt}); err != nil {
			return err
		}
		resp, err := c.api.RawRequestWithContext(ctx, r)
		if resp != nil {
			defer resp.Body.Close()
		}
		if err != nil {
			return err
		}
		s, err := vaultapi.ParseSecret(resp.Body)
		if err != nil {
			return fmt.Errorf("decoding Vault's answer: %w", err)
		}
		if s == nil || s.Auth == nil || s.Auth.ClientToken == "" {
			return errors.New("Vault's answer has no token")
		}
		auth = s.Auth
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return auth.ClientToken, time.Duration(auth.LeaseDuration) * time.Second, nil
}

// serviceAccountToken is the ServiceAccount token of a login: the token
// file read again (the kubelet rotates it), or the token source's.
func (c *Client) serviceAccountToken(ctx context.Context, loginPath string) (string, error) {
	if c.auth.TokenSource == nil {
		jwt, err := os.ReadFile(c.auth.TokenFile)
		if err != nil {
			return "", &Error{Op: OpLogin, Path: loginPath, Class: ClassUnavailable, Reason: err.Error()}
		}
		return strings.TrimSpace(string(jwt)), nil
	}
	jwt, err := c.auth.TokenSource(ctx)
	var e *Error
	switch {
	case errors.As(err, &e):
		return "", e
	case err != nil:
		return "", &Error{Op: OpLogin, Path: loginPath, Class: ClassUnavailable, Reason: err.Error()}
	}
	return strings.TrimSpace(jwt), nil
}
