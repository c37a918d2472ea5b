package chart_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ohmlab/ohmlab-controller/charts/charttest"
	"github.com/ohmlab/ohmlab-controller/test/harness"
)

// TestTwoReleases installs two releases of one name, in two namespaces, watching one namespace
// in common, onto a real API server the way Helm installs a release: every object the release
// renders is created, and one that exists already fails the install (Helm does not adopt an
// object another release owns). The second release leaves the CRD to the first
// (crds.install=false). Each release's ServiceAccount then holds its own permissions, in the
// namespace in common and in its own (SubjectAccessReview), and removing the first release
// leaves the second's intact.
func TestTwoReleases(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cp := harness.ControlPlaneForTest(t, harness.Options{})

	const release, common = "ohmlab", "platform-secrets"
	type installed struct {
		namespace string
		objects   []unstructured.Unstructured
	}
	var releases []installed
	for _, r := range []struct{ namespace, values string }{
		{namespace: "team-a", values: "targets: {vault: {enabled: true, namespaces: [team-a-seeds, " + common + "]}}\n"},
		{namespace: "team-b", values: "targets: {vault: {enabled: true, namespaces: [team-b-seeds, " + common + "]}}\ncrds: {install: false}\n"},
	} {
		objs, err := charttest.RenderE(charttest.Values(t, r.values), charttest.Options{ReleaseName: release, Namespace: r.namespace})
		g.Expect(err).NotTo(HaveOccurred())
		objs = charttest.Core(objs)
		for _, namespace := range charttest.Namespaces(objs) {
			g.Expect(cp.EnsureNamespace(ctx, namespace)).To(Succeed())
		}
		for i := range objs {
			o := objs[i].DeepCopy()
			if o.GetKind() == "CustomResourceDefinition" {
				g.Expect(releases).To(BeEmpty(), "the release with crds.install=false renders %s", charttest.Key(*o))
				// The control plane starts with the CRD: the first release takes it over.
				g.Expect(cp.Client.Patch(ctx, o, client.Apply, client.ForceOwnership, client.FieldOwner("helm"))).To(Succeed())
				continue
			}
			g.Expect(cp.Client.Create(ctx, o)).To(Succeed(), "release %s/%s: creating %s", r.namespace, release, charttest.Key(*o))
		}
		releases = append(releases, installed{namespace: r.namespace, objects: objs})
	}

	// What a release's controller does, as its ServiceAccount.
	can := func(namespace string) map[string]bool {
		user := fmt.Sprintf("system:serviceaccount:%s:%s-%s-vault", namespace, release, fullname)
		checks := map[string]authorizationv1.ResourceAttributes{
			"watch VaultSeeds in " + common:         {Namespace: common, Group: "ohmlab.fr", Resource: "vaultseeds", Verb: "watch"},
			"patch VaultSeed status in " + common:   {Namespace: common, Group: "ohmlab.fr", Resource: "vaultseeds", Subresource: "status", Verb: "patch"},
			"create Events in " + common:            {Namespace: common, Group: "events.k8s.io", Resource: "events", Verb: "create"},
			"watch VaultSeeds in its own namespace": {Namespace: namespace + "-seeds", Group: "ohmlab.fr", Resource: "vaultseeds", Verb: "watch"},
			"update its Lease":                      {Namespace: namespace, Group: "coordination.k8s.io", Resource: "leases", Name: "ohmlab-controller-vault", Verb: "update"},
			"get the CRD":                           {Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: crdName, Verb: "get"},
		}
		out := map[string]bool{}
		for what, attrs := range checks {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attrs}}
			g.Expect(cp.Client.Create(ctx, review)).To(Succeed())
			out[what] = review.Status.Allowed
		}
		return out
	}
	everything := func(allowed bool) map[string]bool {
		return map[string]bool{
			"watch VaultSeeds in " + common: allowed, "patch VaultSeed status in " + common: allowed,
			"create Events in " + common: allowed, "watch VaultSeeds in its own namespace": allowed,
			"update its Lease": allowed, "get the CRD": allowed,
		}
	}
	for _, r := range releases {
		g.Expect(can(r.namespace)).To(Equal(everything(true)), "release %s/%s", r.namespace, release)
	}

	// helm uninstall of the first: its objects go, but the CRD (helm.sh/resource-policy: keep).
	first := releases[0]
	for _, o := range slices.Backward(first.objects) {
		if o.GetKind() == "CustomResourceDefinition" {
			g.Expect(o.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))
			continue
		}
		err := cp.Client.Delete(ctx, o.DeepCopy())
		g.Expect(client.IgnoreNotFound(err)).To(Succeed(), "deleting %s", charttest.Key(o))
		g.Expect(apierrors.IsNotFound(err)).To(BeFalse(), "%s was already gone", charttest.Key(o))
	}
	g.Expect(can(first.namespace)).To(Equal(everything(false)), "the removed release %s/%s", first.namespace, release)
	g.Expect(can(releases[1].namespace)).To(Equal(everything(true)), "release %s/%s after the other's removal", releases[1].namespace, release)
}
