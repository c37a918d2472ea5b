package cluster

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Condition reports whether what a wait waits for holds, and else what it
// saw instead (said when the wait times out). An error ends the wait.
type Condition func(ctx context.Context) (done bool, seen string, err error)

// attemptTimeout bounds one check of a wait.
const attemptTimeout = 30 * time.Second

// WaitFor polls cond every interval until it holds, failing after timeout
// with what it waited for and what it saw last.
func WaitFor(ctx context.Context, what string, interval, timeout time.Duration, cond Condition) error {
	var seen string
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		// One check runs on the caller's context: the wait's deadline must not
		// cut it short, or its last sight would be that deadline.
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		defer cancel()
		done, s, err := cond(actx)
		if s != "" {
			seen = s
		}
		return done, err
	})
	if err == nil {
		return nil
	}
	if seen == "" {
		seen = "nothing yet"
	}
	if wait.Interrupted(err) {
		return fmt.Errorf("waited %s for %s; last seen: %s", time.Since(start).Round(time.Second), what, seen)
	}
	return fmt.Errorf("waiting for %s: %w (last seen: %s)", what, err, seen)
}
