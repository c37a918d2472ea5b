##@ Chart (packaged and pushed as an OCI artifact by hack/chart, with Helm's library; signed with cosign)
# hack/chart is its own Go module (Helm's registry client, oras-go, stays out of go.mod). The chart
# goes to oci://REGISTRY/charts/ohmlab-controller:VERSION (REGISTRY/ohmlab-controller is the image's);
# a pushed chart is always signed, its digest as cosign sign signs an image (COSIGN_FLAGS: mk/image.mk).
CHART_GO     := go -C $(CURDIR)/hack/chart run .
CHART_NAME   := ohmlab-controller
CHART_REPO    = $(REGISTRY)/charts
TEST_MODULES += hack/chart

.PHONY: chart
chart: $(if $(REGISTRY),$(BIN)/cosign) ## Package the chart into dist/; with REGISTRY (INSECURE=1: plain HTTP), push it to oci://REGISTRY/charts and sign it with COSIGN_KEY.
	@test -z "$(REGISTRY)" || test -n "$(COSIGN_KEY)" || { echo "set COSIGN_KEY (a cosign key file or KMS URI): a pushed chart is signed"; exit 1; }
	$(CHART_GO) package -chart $(CURDIR)/charts/$(CHART_NAME) -version $(VERSION) -out $(DIST)
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
