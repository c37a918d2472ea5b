package vaultseed

import (
	"context"
	"fmt"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/internal/tenancy"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// KVSource gives the Vault client of a tenant namespace's objects.
type KVSource interface {
	// KVFor returns the client that logs in as namespace's own Vault
	// identity; an error when namespace is not a tenant namespace.
	KVFor(namespace string) (vaultkv.KV, error)
}

// TenantKV logs each tenant namespace in to Vault as that namespace's
// ServiceAccount (tenancy.Config.ServiceAccount): a short-lived token
// minted with the TokenRequest API, audience tenancy.Config.Audience,
// exchanged at Vault's Kubernetes auth for a token of the tenant role,
// whose templated policy confines it to the namespace's prefix. One client
// per tenant namespace, made at its first use and kept: it logs in once per
// Vault token lifetime (vaultkv.Client), and a token minted for one
// namespace serves no other. Safe for concurrent use.
type TenantKV struct {
	tenants tenancy.Config
	base    vaultkv.Config
	tokens  client.Client

	mu      sync.Mutex
	clients map[string]*vaultkv.Client
}

var _ KVSource = (*TenantKV)(nil)

// NewTenantKV returns the tenants' clients: each has base's address, TLS,
// timeout, rate limit (share one with base.Limiter), metrics and logger,
// and logs in to tenants.Role at mount (the Kubernetes auth mount; ""
// means "kubernetes") with a token that tokens (a client that may create
// serviceaccounts/token) mints.
func NewTenantKV(tenants tenancy.Config, base vaultkv.Config, mount string, tokens client.Client) *TenantKV {
	base.Auth = vaultkv.AuthConfig{Method: vaultkv.MethodKubernetes, Mount: mount, Role: tenants.Role, Audience: tenants.Audience}
	return &TenantKV{tenants: tenants, base: base, tokens: tokens, clients: map[string]*vaultkv.Client{}}
}

// KVFor implements KVSource.
func (t *TenantKV) KVFor(namespace string) (vaultkv.KV, error) {
	return t.client(namespace)
}

func (t *TenantKV) client(namespace string) (*vaultkv.Client, error) {
	if !t.tenants.IsTenant(namespace) {
		return nil, &vaultkv.Error{Op: vaultkv.OpLogin, Path: namespace, Class: vaultkv.ClassInvalid,
			Reason: "not a tenant namespace: no Vault identity of its own"}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.clients[namespace]; ok {
		return c, nil
	}
	cfg := t.base
	cfg.Auth.TokenSource = t.tokenSource(namespace)
	cfg.Logger = cfg.Logger.WithValues("tenant", namespace)
	c, err := vaultkv.New(cfg)
	if err != nil {
		return nil, err
	}
	t.clients[namespace] = c
	return c, nil
}

// Logins returns the Vault logins of each tenant namespace's client so far.
func (t *TenantKV) Logins() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]int, len(t.clients))
	for ns, c := range t.clients {
		out[ns] = c.Logins()
	}
	return out
}

// tokenSource mints a token of namespace's ServiceAccount at each login.
// A ServiceAccount that does not exist, or that the controller may not
// mint tokens of, is a refused login (ClassForbidden): the namespace's
// objects are Forbidden, and they never fall back to another identity.
func (t *TenantKV) tokenSource(namespace string) func(context.Context) (string, error) {
	name := t.tenants.ServiceAccount
	expiration := t.tenants.TokenExpirationSeconds
	return func(ctx context.Context) (string, error) {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{t.tenants.Audience}, ExpirationSeconds: &expiration,
		}}
		err := t.tokens.SubResource("token").Create(ctx, sa, tr)
		if err == nil {
			return tr.Status.Token, nil
		}
		class := vaultkv.ClassUnavailable
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			class = vaultkv.ClassForbidden
		}
		return "", &vaultkv.Error{Op: vaultkv.OpLogin, Path: namespace + "/" + name, Class: class,
			Reason: fmt.Sprintf("requesting a token of the ServiceAccount %s/%s: %v", namespace, name, err)}
	}
}
