package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AdmissionProbe keeps asking the API server to admit two VaultSeeds
// (server-side dry runs, which call the validating webhook like a real
// create): a valid one must be allowed and a bad one refused by our
// webhook. Any other answer (the webhook unreachable, a timeout, a TLS
// error) is a failure: with failurePolicy Fail, a user's apply would
// have failed then.
type AdmissionProbe struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	rounds   int
	failures []string
}

// AdmissionCounts are what a probe saw.
type AdmissionCounts struct {
	// Rounds is the number of rounds (one valid and one bad object each).
	Rounds int
	// Failures are the answers that were neither, with the time and the
	// error.
	Failures []string
}

// StartAdmissionProbe sends a round every interval until Stop. valid and
// bad are VaultSeeds; bad's refusal must contain refusal.
func StartAdmissionProbe(c *Cluster, valid, bad *unstructured.Unstructured, refusal string, interval time.Duration) *AdmissionProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &AdmissionProbe{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			p.round(ctx, c, valid, bad, refusal)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

func (p *AdmissionProbe) round(ctx context.Context, c *Cluster, valid, bad *unstructured.Unstructured, refusal string) {
	var failed []string
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.Client.Create(rctx, valid.DeepCopy(), client.DryRunAll); err != nil {
		failed = append(failed, fmt.Sprintf("valid %s not admitted: %v", valid.GetName(), err))
	}
	err := c.Client.Create(rctx, bad.DeepCopy(), client.DryRunAll)
	switch {
	case err == nil:
		failed = append(failed, fmt.Sprintf("bad %s admitted", bad.GetName()))
	case !IsWebhookRefusal(err, refusal):
		failed = append(failed, fmt.Sprintf("bad %s: not our webhook's refusal: %v", bad.GetName(), err))
	}
	if ctx.Err() != nil {
		return // stopped mid-round: not an answer
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rounds++
	for _, f := range failed {
		p.failures = append(p.failures, time.Now().UTC().Format("15:04:05.000")+" "+f)
	}
}

// IsWebhookRefusal says whether err is the API server relaying a denial
// by the VaultSeed webhook that names refusal (not an error calling it).
func IsWebhookRefusal(err error, refusal string) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, `admission webhook "vvaultseed.ohmlab.fr" denied the request`) && strings.Contains(msg, refusal)
}

// Stop ends the probe and returns what it saw.
func (p *AdmissionProbe) Stop() AdmissionCounts {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return AdmissionCounts{Rounds: p.rounds, Failures: append([]string(nil), p.failures...)}
}
