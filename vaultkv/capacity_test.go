package vaultkv_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ohmlab/ohmlab-controller/test/harness"
	"github.com/ohmlab/ohmlab-controller/vaultkv"
)

// BenchmarkIntegrationNewPath measures what a Vault dev server on this
// machine sustains for the controller's creation of a path (issue 25: the
// default client limit, targets.vault.backend.qps): a read of its
// metadata finding none (ReadNew), the owner marker creating its metadata, the data written with
// cas=0, three requests, from several clients at once and without a
// client-side limit. It reports Vault's requests per second.
//
//	go test -run '^$' -bench NewPath -benchtime 3000x ./vaultkv/
func BenchmarkIntegrationNewPath(b *testing.B) {
	var newPaths atomic.Int64 // each path is new: b.N grows over runs
	v := harness.VaultForTest(b)
	for _, clients := range []int{4, 16, 64} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			c, err := vaultkv.New(vaultkv.Config{Address: v.Addr, Timeout: 10 * time.Second,
				Auth: vaultkv.AuthConfig{Method: vaultkv.MethodToken, Token: harness.VaultRootToken}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			work := make(chan struct{})
			done := make(chan error, clients)
			b.ResetTimer()
			start := time.Now()
			for range clients {
				go func() {
					var failed error
					for range work {
						if failed != nil {
							continue // drain, so the feeder never blocks
						}
						path := fmt.Sprintf("ohmlab/platforms/capacity/p/%d", newPaths.Add(1))
						if _, failed = c.ReadNew(ctx, path); failed != nil {
							continue
						}
						if failed = c.MarkNew(ctx, path, map[string]string{"ohmlab.fr/owner": "bench/p"}); failed != nil {
							continue
						}
						_, failed = c.Write(ctx, path, map[string]any{"password": "x"}, 0)
					}
					done <- failed
				}()
			}
			for range b.N {
				work <- struct{}{}
			}
			close(work)
			for range clients {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(3*b.N)/time.Since(start).Seconds(), "requests/s")
		})
	}
}
