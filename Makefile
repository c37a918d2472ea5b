# ohmlab controller. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BIN       := $(CURDIR)/bin
# The release version has one source, the VERSION file: the binaries, the image tag, the chart's
# version and appVersion (and so the CRD's ohmlab.fr/revision) follow it; `make verify` checks them.
VERSION   := $(shell cat $(CURDIR)/VERSION)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/ohmlab/ohmlab-controller/internal/buildinfo.Version=$(VERSION) \
             -X github.com/ohmlab/ohmlab-controller/internal/buildinfo.Revision=$(REVISION)
CONTROLLER_GEN := go tool controller-gen
# Every build and test here has the image's configuration: no cgo, -trimpath. Go's build cache keys a
# compiled package by its flags, so the tests, the test tools and the image then compile each package
# they share once (docs/maintainers/testing.md, "The test commands").
# A GOFLAGS of the environment or the command line is kept, -trimpath added; CGO_ENABLED=1 in the
# environment (which -race needs) builds apart from that cache.
export CGO_ENABLED ?= 0
export override GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(if $(GOFLAGS),$(GOFLAGS),$(shell go env GOFLAGS))))
TOOLS_GOFLAGS  := -ldflags=-s\ -w
# The Kubernetes binaries carry their release (test/tools/k8s/go.mod's k8s.io/kubernetes), as /version and
# the Node object show it: the chart's kubeVersion is checked against it.
K8S_VERSION    := v1.37.2
K8S_LDFLAGS    := -s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
                  -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37
FUZZTIME  ?= 10s

# TOOLS are the test binaries `make tools` builds; TEST_MODULES are the
# separate Go modules (heavy test dependencies kept out of go.mod) whose
# tests `make test` also runs. Each mk/*.mk file adds its own.
VAULT        := $(BIN)/vault $(BIN)/vault-plugins/kubernetes
TOOLS        := $(BIN)/k8s/kube-apiserver $(BIN)/k8s/kubectl $(BIN)/k8s/etcd $(VAULT)
TEST_MODULES :=
include $(sort $(wildcard mk/*.mk))

##@ General
.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development
.PHONY: generate
generate: ## Generate deepcopy code (controller-gen).
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: manifests
# No RBAC is generated: the controller's permissions are namespaced Roles in
# the watched and leader-election namespaces, which only the chart knows
# (templates/rbac.yaml, each verb proven needed by test/e2e TestRBACIsMinimal).
manifests: ## Generate the CRD and webhook manifests into config/, and copy the CRD into the chart.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) webhook paths=./webhooks/... output:webhook:artifacts:config=config/webhook
	@if [ -d charts/ohmlab-controller ]; then mkdir -p charts/ohmlab-controller/files/crds && cp config/crd/bases/*.yaml charts/ohmlab-controller/files/crds/; fi

.PHONY: build
build: ## Build bin/ohmlab and bin/ohmlab-controller.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

.PHONY: test
# TEST_TIMEOUT bounds each test binary: above go test's default 10m, which the real-server suites
# (test/e2e, test/faults) come near on a loaded 2-core machine; under CI's own limit.
TEST_TIMEOUT ?= 30m
# The test modules compile and run while the main module's tests do: those mostly wait on their
# servers, leaving the cores to the modules' compiles. Each module's output is printed as one block
# when it is done; every module runs, and make test fails when the main module or any module does.
test: tools ## Run every test against real servers (builds the tools first).
	@( failed=; for m in $(TEST_MODULES); do \
	    out=$$(cd $$m && go test -count=1 -timeout $(TEST_TIMEOUT) ./... 2>&1) || failed="$$failed $$m"; \
	    printf 'go test (%s)\n%s\n' "$$m" "$$out"; \
	  done; test -z "$$failed" || { echo "FAIL: the test modules$$failed"; exit 1; } ) & \
	modules=$$!; \
	echo "go test -count=1 -timeout $(TEST_TIMEOUT) ./..."; \
	main=0; go test -count=1 -timeout $(TEST_TIMEOUT) ./... || { main=$$?; echo "FAIL: the main module"; }; \
	rc=0; wait $$modules || rc=$$?; \
	test $$main = 0 && test $$rc = 0

.PHONY: fuzz
# Go 1.26's fuzz coordinator can fail a target with a bare "context deadline exceeded" when -fuzztime
# ends under load (golang/go#75804, fixed in Go 1.27): such a run, with no failing input written, is
# run once more; any other failure stops make at once.
fuzz: ## Run each fuzz target for FUZZTIME (default 10s).
	@log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	for dir in $$(grep -l '^func Fuzz' $$(git ls-files '*_test.go') | xargs -n1 dirname | sort -u); do \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -d' ' -f2); do \
	    for attempt in 1 2; do \
	      echo "fuzz ./$$dir $$f"; \
	      if go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s ./$$dir 2>&1 | tee "$$log"; test $${PIPESTATUS[0]} -eq 0; then break; fi; \
	      if [ $$attempt = 1 ] && grep -q 'context deadline exceeded' "$$log" && ! grep -q 'Failing input written' "$$log"; then \
	        echo "fuzz ./$$dir $$f: the Go 1.26 fuzztime race (golang/go#75804), no failing input: once more"; continue; fi; \
	      exit 1; \
	    done; \
	  done; \
	done

.PHONY: bench
bench: ## Run the benchmarks.
	go test -run '^$$' -bench . -benchmem ./...

.PHONY: verify
verify: ## Regenerate and fail on a diff; gofmt, go vet, CRD compatibility, no tracked binary or large file, the rules of the house.
	$(MAKE) generate manifests
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- api config charts)" || { git status --porcelain -- api config charts; echo "untracked generated files: commit them"; exit 1; }
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt would change the files above"; exit 1; }
	go vet ./...
	go run ./hack/crdcompat -accepted hack/crdcompat/accepted.yaml config/crd/released config/crd/bases
	go run ./hack/trackedfiles
	go run ./hack/housecheck
verify: verify-modules

# Every Go module of the tree: the product's (.) and the separate ones under hack/ and test/ (tracked or new).
GO_MODULES = $(sort $(patsubst %/,%,$(dir $(shell git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod'))))
# The test modules' tidy loads their tools' whole dependency graphs (many GB from an empty module cache):
# verify checks the product's and hack/'s modules; verify-test-modules checks the others.
TEST_GO_MODULES = $(filter test/%,$(GO_MODULES))

.PHONY: verify-modules verify-test-modules
# A tool module lists what it builds as tool directives, so that tidy keeps their dependencies. No build
# may rewrite a go.mod (the mod flag set to mod): what is built is what go.mod and go.sum say.
verify-modules: ## Fail when the product's or hack/'s go.mod or go.sum is not what `go mod tidy` writes, or a build may rewrite them.
	@$(call tidy-diff,$(filter-out $(TEST_GO_MODULES),$(GO_MODULES)))
	@! grep -n -e '-mod[=]mod' $$(git ls-files Makefile 'mk/*.mk' '.ci/*') || { echo "the builds above may rewrite their go.mod: build each module as its go.mod and go.sum say" >&2; exit 1; }
	@grep -q '^require k8s.io/kubernetes $(K8S_VERSION) ' test/tools/k8s/go.mod || { echo "K8S_VERSION ($(K8S_VERSION)) is not test/tools/k8s/go.mod's k8s.io/kubernetes: the binaries would announce another release" >&2; exit 1; }
verify-test-modules: ## The same for the test modules (test/*): slow from an empty module cache.
	@$(call tidy-diff,$(TEST_GO_MODULES))

# tidy-diff fails when a module of $(1) is not tidy, printing the diff and the fix.
define tidy-diff
fail=; for m in $(1); do \
  go -C $$m mod tidy -diff || { echo "$$m: go.mod or go.sum is not tidy (the diff above): run 'go -C $$m mod tidy' and commit" >&2; fail=1; }; \
done; test -z "$$fail"
endef

##@ Test tools (built once into bin/, from the Go module proxy)
.PHONY: tools
# TOOLS_JOBS tools build at once (unless make was given its own -j): a build of one tool leaves a core
# idle while it links or compiles a package everything else waits on. In that make, the tools that
# share packages (one module's) build one after the other (TOOLS_IN_TURN's order-only prerequisites),
# so that no package compiles twice at the same time; each one's output is printed when it is done.
TOOLS_JOBS ?= 2
tools: ## Build the test binaries (kube-apiserver, kubectl, etcd, vault, and those of mk/*.mk).
	@$(MAKE) --no-print-directory --output-sync=target $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(TOOLS_JOBS)) TOOLS_IN_TURN=1 $(TOOLS)
ifdef TOOLS_IN_TURN
$(BIN)/k8s/kubectl: | $(BIN)/k8s/kube-apiserver
$(BIN)/k8s/etcd: | $(BIN)/k8s/kubectl
$(BIN)/vault-plugins/kubernetes: | $(BIN)/vault
$(BIN)/kyverno: | $(BIN)/cosign
endif

K8S_MOD := test/tools/k8s/go.mod test/tools/k8s/go.sum
$(BIN)/k8s/kube-apiserver: $(K8S_MOD)
	cd test/tools/k8s && go build -ldflags='$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kube-apiserver
$(BIN)/k8s/kubectl: $(K8S_MOD)
	cd test/tools/k8s && go build -ldflags='$(K8S_LDFLAGS)' -o $@ k8s.io/kubernetes/cmd/kubectl
$(BIN)/k8s/etcd: $(K8S_MOD)
	cd test/tools/k8s && go build $(TOOLS_GOFLAGS) -o $@ go.etcd.io/etcd/server/v3

# Vault is BUSL-licensed: built for the tests only, never shipped. The minimal build tag is Vault's
# own build without the cloud plugins (most of a full build's compile); the Kubernetes auth method,
# built in to a release, is that same plugin built apart at the version Vault's go.mod pins, which
# the test harness registers under the built-in's name (test/harness/vaultplugin.go).
VAULT_MOD := test/tools/vault/go.mod test/tools/vault/go.sum
$(BIN)/vault: $(VAULT_MOD)
	cd test/tools/vault && go build $(TOOLS_GOFLAGS) -tags minimal -o $@ github.com/hashicorp/vault
$(BIN)/vault-plugins/kubernetes: $(VAULT_MOD)
	cd test/tools/vault && go build $(TOOLS_GOFLAGS) -o $@ github.com/hashicorp/vault-plugin-auth-kubernetes/cmd/vault-plugin-auth-kubernetes

##@ Demo
RESYNC    ?= 10m
DEMO_EXIT ?=
.PHONY: demo
# The demo needs only the control plane and Vault of make tools, not the engines of the other tests.
demo: $(BIN)/k8s/kube-apiserver $(BIN)/k8s/kubectl $(BIN)/k8s/etcd $(VAULT) build ## Run the controller on loopback with the keycloak example (RESYNC=15s, DEMO_EXIT=1).
	go run ./test/demo -resync=$(RESYNC) $(if $(DEMO_EXIT),-exit)
