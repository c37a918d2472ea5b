##@ Cluster test (the chart on the node of make cluster; needs root)
# test/cluster is its own Go module (Helm's library, client-go, cert-manager through test/certmanager).
# make test does not run it: it needs the node, which make test-cluster brings up and takes down.
# The image is make image's index, imported under the chart's default repository and tag.
CLUSTER_IMAGE_REPO   ?= ghcr.io/ohmlab/$(IMAGE_NAME)
CLUSTER_IMAGE         = $(CLUSTER_IMAGE_REPO):$(VERSION)
# The node's network namespace and address (hack/cluster's contract, in its main.go).
CLUSTER_NETNS        := ohmlab-node
CLUSTER_NODE_IP      := 10.77.0.2
CLUSTER_TEST_TIMEOUT ?= 20m
# The NetworkPolicy step's probe pods run test/cluster/cmd/dial, imported as a one-binary image.
CLUSTER_DIAL_IMAGE   := ohmlab.fr/test/dial:v1

.PHONY: test-cluster
# A test of the working tree, not a release: uncommitted work is built too (no provenance then).
test-cluster: IMAGE_ALLOW_DIRTY = 1
test-cluster: $(BIN)/k8s/kubectl $(VAULT) $(BIN)/cosign image cluster-deps $(NODE_BINS) $(CLUSTER) ## Build the image, bring the node up, make chart to an in-process registry, helm install it from there and check the deployed product, take the node down.
	@# The test binary, and hack/chart that it runs (make chart), are compiled before the node is up
	@# (the one node of the machine is held only while the test runs). A failed up takes itself down;
	@# an up refused because a node is up already must not take that one down: the down trap is set
	@# once this up succeeded.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	go -C $(CURDIR)/test/cluster test -c -o "$$tmp/cluster.test" . || exit 1; \
	go -C $(CURDIR)/hack/chart build -o "$$tmp/chart" . || exit 1; \
	CGO_ENABLED=0 go -C $(CURDIR)/test/cluster build -trimpath -ldflags='-s -w' -o "$$tmp/dial" ./cmd/dial || exit 1; \
	kubeconfig=$$($(MAKE) -s --no-print-directory -C $(CURDIR) cluster) || exit 1; \
	trap '$(MAKE) -s --no-print-directory -C $(CURDIR) cluster-down; rm -rf "$$tmp"' EXIT; \
	$(MAKE) -s --no-print-directory -C $(CURDIR) cluster-load ARCHIVE=$(DIST)/$(IMAGE_NAME)-$(VERSION).oci.tar NAME=$(CLUSTER_IMAGE_REPO) || exit 1; \
	$(CLUSTER) load-binary -dir $(CLUSTER_DIR) $(CLUSTER_DIAL_IMAGE) "$$tmp/dial" || exit 1; \
	cd $(CURDIR)/test/cluster && \
	  OHMLAB_CLUSTER_KUBECONFIG=$$kubeconfig \
	  OHMLAB_CLUSTER_NODE_EXEC="ip netns exec $(CLUSTER_NETNS)" \
	  OHMLAB_CLUSTER_NODE_IP=$(CLUSTER_NODE_IP) \
	  OHMLAB_CLUSTER_IMAGE=$(CLUSTER_IMAGE) \
	  OHMLAB_CLUSTER_IMAGE_LAYOUT=$(DIST)/oci \
	  OHMLAB_CLUSTER_COSIGN=$(BIN)/cosign \
	  OHMLAB_CLUSTER_DIAL_IMAGE=$(CLUSTER_DIAL_IMAGE) \
	  "$$tmp/cluster.test" -test.count=1 -test.v -test.timeout=$(CLUSTER_TEST_TIMEOUT)

.PHONY: verify-clustertest
verify-clustertest: ## go vet the cluster test (its own module, outside go vet ./...).
	go -C $(CURDIR)/test/cluster vet ./...
verify: verify-clustertest
