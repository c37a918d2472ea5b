package main

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The node enforces NetworkPolicy with kube-router's firewall alone
// (--run-firewall; its router and service proxy stay off: the CNI bridge
// routes, kube-proxy proxies). It is the enforcer this kernel can run
// (docs/maintainers/real-node.md, "NetworkPolicy"): iptables and ipset, no nftables
// queue.
const (
	// KubeRouterUser is kube-router's client certificate's user.
	KubeRouterUser = "ohmlab-node:kube-router"
	// KubeRouterHealthPort serves kube-router's /healthz on the node's
	// network: 200 once its controllers have synced and keep beating.
	KubeRouterHealthPort = 20244
)

// kubeRouterRole is what kube-router's informers read: it starts them all
// (pods, namespaces, policies, nodes, Services and their endpoints) even
// with only the firewall on, and writes nothing.
var kubeRouterRole = rbacv1.ClusterRole{
	ObjectMeta: metav1.ObjectMeta{Name: KubeRouterUser},
	Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces", "nodes", "services", "endpoints"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}},
	},
}

// grantKubeRouter creates kube-router's ClusterRole and binds it to its
// user (a fresh etcd each up: create, never update).
func grantKubeRouter(ctx context.Context, c kubernetes.Interface) error {
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: KubeRouterUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kubeRouterRole.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: KubeRouterUser}},
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, kubeRouterRole.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router's ClusterRole: %w", err)
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube-router's ClusterRoleBinding: %w", err)
	}
	return nil
}
