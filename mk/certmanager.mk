# cert-manager, in-process, for the chart's webhook certificate
# (test/certmanager: its issuing controllers and cainjector from
# github.com/cert-manager/cert-manager, against the envtest API server).
# Nothing to build into bin/: the module's tests compile cert-manager.
TEST_MODULES += test/certmanager

##@ cert-manager

.PHONY: test-certmanager
test-certmanager: $(BIN)/k8s/kube-apiserver $(BIN)/k8s/etcd $(BIN)/k8s/kubectl $(VAULT) ## Run the cert-manager webhook certificate test.
	cd test/certmanager && go test -count=1 -timeout $(TEST_TIMEOUT) ./...
