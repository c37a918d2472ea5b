##@ Image (built without a container daemon, by hack/image)
# The image build program is its own Go module (go-containerregistry stays out of go.mod), run with
# the toolchain its go.mod pins: it gzips the layers, so its Go release is part of the digest too.
IMAGE_TOOLCHAIN   := $(shell sed -n 's/^toolchain //p' $(CURDIR)/hack/image/go.mod)
IMAGE_GO          := GOTOOLCHAIN=$(IMAGE_TOOLCHAIN) go -C $(CURDIR)/hack/image run .
DIST              ?= $(CURDIR)/dist
IMAGE_PLATFORMS   ?= linux/amd64,linux/arm64
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_NAME        ?= ohmlab-controller
# COSIGN_FLAGS are added to cosign sign and cosign attest: by default cosign uses Sigstore's public
# services (Rekor); for a private registry, --signing-config=FILE of `cosign signing-config create`
# (no transparency log) and --trusted-root=FILE, as hack/image's signing test does offline.
COSIGN_FLAGS      ?=
# make image refuses a tree that differs from its commit (untracked files too). IMAGE_ALLOW_DIRTY=1
# is the development build: the image from the working tree as it is, and no provenance.json, so
# make sign has nothing to attest. make test-cluster sets it: a test, not a release.
IMAGE_ALLOW_DIRTY ?=

TOOLS        += $(BIN)/cosign $(BIN)/kyverno
TEST_MODULES += hack/image

.PHONY: image
image: ## Build the image index (linux/amd64, linux/arm64) of a clean tree into dist/: OCI layout, archive, digest, provenance.
	$(IMAGE_GO) build -root $(CURDIR) -out $(DIST) -version $(VERSION) -revision $(REVISION) \
	  -source-date-epoch $(SOURCE_DATE_EPOCH) -platforms $(IMAGE_PLATFORMS) $(if $(IMAGE_ALLOW_DIRTY),-allow-dirty)

.PHONY: image-push
image-push: ## Push dist/'s index to REGISTRY/ohmlab-controller:VERSION (REGISTRY=host[:port]/path; INSECURE=1: plain HTTP).
	@test -n "$(REGISTRY)" || { echo "set REGISTRY, e.g. make image-push REGISTRY=ghcr.io/ohmlab"; exit 1; }
	$(IMAGE_GO) push -layout $(DIST)/oci -ref $(REGISTRY)/$(IMAGE_NAME):$(VERSION) $(if $(INSECURE),-insecure)

.PHONY: sign
sign: $(BIN)/cosign ## Sign the pushed digest with COSIGN_KEY and attest dist/provenance.json (slsaprovenance1).
	@test -n "$(REGISTRY)" || { echo "set REGISTRY (the one image-push pushed to)"; exit 1; }
	@test -n "$(COSIGN_KEY)" || { echo "set COSIGN_KEY (a cosign key file or KMS URI)"; exit 1; }
	@test -f $(DIST)/provenance.json || { echo "$(DIST) holds no provenance.json: a development build (IMAGE_ALLOW_DIRTY) is not signed"; exit 1; }
	$(BIN)/cosign sign --yes --key $(COSIGN_KEY) $(COSIGN_FLAGS) $(REGISTRY)/$(IMAGE_NAME)@$$(cat $(DIST)/digest)
	$(BIN)/cosign attest --yes --key $(COSIGN_KEY) $(COSIGN_FLAGS) --type slsaprovenance1 \
	  --predicate $(DIST)/provenance.json $(REGISTRY)/$(IMAGE_NAME)@$$(cat $(DIST)/digest)

# One version everywhere: the chart, rendered with Helm's library, must carry the VERSION file
# as version, appVersion, image tag and the CRD's ohmlab.fr/revision.
.PHONY: verify-version
verify-version: ## Fail when the chart and its CRD do not carry the VERSION file's release.
	go test -count=1 -run '^TestOneVersion$$' ./charts/ohmlab-controller
verify: verify-version verify-image

.PHONY: verify-image
verify-image: ## go vet the image build program (its own module, outside go vet ./...).
	go -C $(CURDIR)/hack/image vet ./...

# cosign is built in Kyverno's module, whose graph holds cosign's: the packages they share compile once.
$(BIN)/cosign: test/tools/kyverno/go.mod test/tools/kyverno/go.sum
	cd test/tools/kyverno && go build $(TOOLS_GOFLAGS) -o $@ github.com/sigstore/cosign/v3/cmd/cosign

# Kyverno's CLI, whose engine hack/image's TestKyvernoAdmitsOnlyTheSignedImage runs on the chart
# README's verify-images policy. Its module repeats Kyverno's replace of pod-security-admission.
$(BIN)/kyverno: test/tools/kyverno/go.mod test/tools/kyverno/go.sum
	cd test/tools/kyverno && go build $(TOOLS_GOFLAGS) -o $@ github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno
