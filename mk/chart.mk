##@ Chart (packaged and pushed as an OCI artifact by hack/chart, with Helm's library; signed with cosign)
# hack/chart is its own Go module (Helm's registry client, oras-go, stays out of go.mod). The chart
# goes to oci://REGISTRY/charts/ohmlab-controller:VERSION (REGISTRY/ohmlab-controller is the image's);
# a pushed chart is always signed, its digest as cosign sign signs an image (COSIGN_FLAGS: mk/image.mk).
# Run with the toolchain its go.mod pins: it gzips the archive, so its Go release is part of the digest.
CHART_TOOLCHAIN := $(shell sed -n 's/^toolchain //p' $(CURDIR)/hack/chart/go.mod)
CHART_GO     := GOTOOLCHAIN=$(CHART_TOOLCHAIN) go -C $(CURDIR)/hack/chart run .
CHART_NAME   := ohmlab-controller
CHART_REPO    = $(REGISTRY)/charts
# make chart refuses a tree that differs from its commit (untracked files too), and pins image.digest
# to the digest make image wrote into DIST from the same commit. CHART_ALLOW_DIRTY=1 is the development
# chart: the working tree as it is, image.digest left unset (make test-cluster: a test, not a release).
CHART_ALLOW_DIRTY ?=
TEST_MODULES += hack/chart

.PHONY: chart
chart: $(if $(REGISTRY),$(BIN)/cosign) ## Package a clean tree's chart, pinned to make image's digest, into dist/; with REGISTRY (INSECURE=1: plain HTTP), push it to oci://REGISTRY/charts and sign it with COSIGN_KEY.
	@test -z "$(REGISTRY)" || test -n "$(COSIGN_KEY)" || { echo "set COSIGN_KEY (a cosign key file or KMS URI): a pushed chart is signed"; exit 1; }
	$(CHART_GO) package -chart $(CURDIR)/charts/$(CHART_NAME) -version $(VERSION) -out $(DIST) -image $(DIST) \
	  -source-date-epoch $(SOURCE_DATE_EPOCH) $(if $(CHART_ALLOW_DIRTY),-allow-dirty)
ifneq ($(REGISTRY),)
	$(CHART_GO) push -file $(DIST)/$(CHART_NAME)-$(VERSION).tgz -repo $(CHART_REPO) \
	  -source-date-epoch $(SOURCE_DATE_EPOCH) $(if $(INSECURE),-insecure) > $(DIST)/chart.ref
	$(BIN)/cosign sign --yes --key $(COSIGN_KEY) $(COSIGN_FLAGS) $$(cat $(DIST)/chart.ref)
	@cat $(DIST)/chart.ref
endif

.PHONY: verify-chart
verify-chart: ## go vet the chart publishing program (its own module, outside go vet ./...).
	go -C $(CURDIR)/hack/chart vet ./...
verify: verify-chart
