##@ Fault injection (issue 12, item 9)
.PHONY: faults
faults: tools ## Run the fault-injection suite (test/faults) and print its table of faults x outcome.
	go test -count=1 -timeout $(TEST_TIMEOUT) -v -run '^TestFaults$$' ./test/faults 2>&1 | grep -E '^\s*(\||--- FAIL|FAIL|ok )|_test\.go:[0-9]+: '
