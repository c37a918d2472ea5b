##@ Cluster (a real single-node Kubernetes on this machine; needs root)
# hack/cluster is its own Go module (client-go, the kubelet's and kube-proxy's configuration types,
# go-containerregistry for the pause image). The node binaries come from test/tools/k8s, the module
# kube-apiserver is built from; containerd, runc and the CNI plugins from Debian (cluster-deps).
CLUSTER_DIR      ?= $(CURDIR)/.cluster
CLUSTER          := $(CLUSTER_DIR)/bin/cluster
CLUSTER_TIMEOUT  ?= 2m
K8S_NODE_BINS    := $(BIN)/k8s/kubelet $(BIN)/k8s/kube-controller-manager $(BIN)/k8s/kube-scheduler $(BIN)/k8s/kube-proxy
# kube-router's firewall enforces NetworkPolicy on the node (test/tools/kube-router, its own module).
KUBE_ROUTER      := $(BIN)/k8s/kube-router
NODE_BINS        := $(K8S_NODE_BINS) $(KUBE_ROUTER)
TEST_MODULES     += hack/cluster
CLUSTER_DEBS     := containerd runc containernetworking-plugins iptables conntrack ipset iproute2

# go build leaves an up-to-date binary untouched: touch it, or make would ask go again every time.
# (K8S_MOD is defined after the mk/ files are included: name the files here.)
$(K8S_NODE_BINS): $(BIN)/k8s/%: test/tools/k8s/go.mod test/tools/k8s/go.sum
	cd test/tools/k8s && go build -ldflags='$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/$*
	@touch $@

$(KUBE_ROUTER): test/tools/kube-router/go.mod test/tools/kube-router/go.sum
	cd test/tools/kube-router && go build $(TOOLS_GOFLAGS) -o $@ github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
	@touch $@

.PHONY: node-bins
node-bins: $(NODE_BINS) ## Build kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kube-router into bin/k8s.

.PHONY: cluster-deps
cluster-deps: ## Install containerd, runc, the CNI plugins, iptables, conntrack, ipset and iproute2 from Debian when missing (root).
	@test "$$(id -u)" = 0 || { echo "make cluster needs root: it runs containerd and the kubelet and changes sysctls (docs/maintainers/real-node.md)" >&2; exit 1; }
	@missing=; for p in $(CLUSTER_DEBS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "apt-get install$$missing" >&2; \
	  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >&2; fi

# The cluster program and the pause binary (static: the pause image holds nothing else).
.PHONY: $(CLUSTER)
$(CLUSTER):
	@go -C $(CURDIR)/hack/cluster build -o $(CLUSTER_DIR)/bin/cluster .
	@CGO_ENABLED=0 go -C $(CURDIR)/hack/cluster build -trimpath -ldflags='-s -w' -o $(CLUSTER_DIR)/bin/pause ./cmd/pause

.PHONY: cluster
cluster: cluster-deps $(NODE_BINS) $(CLUSTER) ## Bring the node up (root; ~10 s) and print its kubeconfig's path (.cluster/kubeconfig).
	@$(CLUSTER) up -dir $(CLUSTER_DIR) -k8s-bin $(BIN)/k8s -timeout $(CLUSTER_TIMEOUT)

.PHONY: cluster-down
cluster-down: $(CLUSTER) ## Take the node down and put the host back (sysctls, namespaces, mounts, directories).
	@$(CLUSTER) down -dir $(CLUSTER_DIR)

.PHONY: cluster-load
cluster-load: $(CLUSTER) ## Import ARCHIVE (docker or OCI archive) into the node's containerd; NAME=repo for a tag-only OCI index.
	@test -n "$(ARCHIVE)" || { echo "set ARCHIVE, e.g. make cluster-load ARCHIVE=dist/ohmlab-controller-$(VERSION).oci.tar NAME=ghcr.io/ohmlab/ohmlab-controller"; exit 1; }
	@$(CLUSTER) load -dir $(CLUSTER_DIR) $(if $(NAME),-name $(NAME)) $(ARCHIVE)

.PHONY: verify-cluster
verify-cluster: ## go vet the cluster program (its own module, outside go vet ./...).
	go -C $(CURDIR)/hack/cluster vet ./...
verify: verify-cluster

# The smoke test brings its own node up (refusing when one is up already), runs a pod from a locally
# imported image under restricted Pod Security, reaches its Service from the host and from kube-apiserver
# (a webhook), takes the node down and compares the host with what it was.
.PHONY: cluster-smoke
cluster-smoke: cluster-deps $(NODE_BINS) ## Up, a pod and its Service reached from the host and kube-apiserver, down; the host unchanged.
	cd hack/cluster && CLUSTER_SMOKE=1 CLUSTER_K8S_BIN=$(BIN)/k8s go test -count=$(or $(COUNT),1) -v -run '^TestSmoke' .
