package harness

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	vaultapi "github.com/hashicorp/vault/api"
)

// KubernetesAuthMount is the path the harness enables Vault's Kubernetes
// auth method at.
const KubernetesAuthMount = "kubernetes"

// KubernetesRole is a role of Vault's Kubernetes auth method.
type KubernetesRole struct {
	Name           string
	ServiceAccount string // bound ServiceAccount name
	Namespace      string // its namespace
	Audience       string // the only audience the role accepts, e.g. "vault"
	Policies       []string
	TTL            time.Duration // token_ttl; 0 means Vault's default
}

// EnableKubernetesAuth enables Vault's Kubernetes auth method at
// KubernetesAuthMount, pointed at the control plane's apiserver, with a
// reviewer ServiceAccount bound to system:auth-delegator.
func (v *Vault) EnableKubernetesAuth(ctx context.Context, cp *ControlPlane) error {
	const ns, reviewer = "kube-system", "vault-token-reviewer"
	if err := cp.EnsureServiceAccount(ctx, ns, reviewer); err != nil {
		return err
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-token-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: reviewer, Namespace: ns}},
	}
	if err := cp.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding the token reviewer: %w", err)
	}
	jwt, err := cp.ServiceAccountToken(ctx, ns, reviewer, "", 24*time.Hour)
	if err != nil {
		return err
	}
	if err := registerKubernetesPlugin(ctx, v.Client); err != nil {
		return err
	}
	if err := v.Client.Sys().EnableAuthWithOptions(KubernetesAuthMount, &vaultapi.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		return fmt.Errorf("enabling kubernetes auth: %w", err)
	}
	_, err = v.Client.Logical().WriteWithContext(ctx, "auth/"+KubernetesAuthMount+"/config", map[string]any{
		"kubernetes_host":        cp.Config.Host,
		"kubernetes_ca_cert":     string(cp.Config.CAData),
		"token_reviewer_jwt":     jwt,
		"disable_local_ca_jwt":   true,
		"disable_iss_validation": true,
	})
	if err != nil {
		return fmt.Errorf("configuring kubernetes auth: %w", err)
	}
	return nil
}

// WriteKubernetesRole creates or replaces a role of the Kubernetes auth
// method.
func (v *Vault) WriteKubernetesRole(ctx context.Context, r KubernetesRole) error {
	body := map[string]any{
		"bound_service_account_names":      []string{r.ServiceAccount},
		"bound_service_account_namespaces": []string{r.Namespace},
		"audience":                         r.Audience,
		"token_policies":                   r.Policies,
	}
	if r.TTL > 0 {
		body["token_ttl"] = int(r.TTL.Seconds())
		body["token_max_ttl"] = int(r.TTL.Seconds())
	}
	if _, err := v.Client.Logical().WriteWithContext(ctx, "auth/"+KubernetesAuthMount+"/role/"+r.Name, body); err != nil {
		return fmt.Errorf("writing kubernetes role %s: %w", r.Name, err)
	}
	return nil
}

// EnsureServiceAccount creates a namespace and a ServiceAccount in it when
// they do not exist yet.
func (cp *ControlPlane) EnsureServiceAccount(ctx context.Context, namespace, name string) error {
	if err := cp.EnsureNamespace(ctx, namespace); err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := cp.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating serviceaccount %s/%s: %w", namespace, name, err)
	}
	return nil
}

// EnsureNamespace creates a namespace when it does not exist yet.
func (cp *ControlPlane) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := cp.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// ServiceAccountToken asks the apiserver for a token of a ServiceAccount
// (TokenRequest), with the given audience ("" means the apiserver's) and
// lifetime, as the kubelet does for a projected token.
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name, audience string, ttl time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(ttl.Seconds())),
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
