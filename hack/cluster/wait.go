package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// waiter waits for the node's parts, failing fast (with the log's tail)
// when a daemon it waits on has exited.
type waiter struct {
	l       Layout
	client  kubernetes.Interface
	started map[string]int
}

func newWaiter(kubeconfig string, l Layout, started map[string]int) (*waiter, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &waiter{l: l, client: c, started: started}, nil
}

// dead names a started daemon that has exited, with its log's tail.
func (w *waiter) dead() error {
	for _, name := range slices.Sorted(maps.Keys(w.started)) {
		if !Alive(w.started[name]) {
			return exited(w.l, name)
		}
	}
	return nil
}

// exited is the error of daemon name having exited, with its log's tail.
func exited(l Layout, name string) error {
	return fmt.Errorf("%s exited; the end of %s:\n%s", name, l.Logs()+"/"+name+".log", LogTail(l, name, 15))
}

// poll runs cond every 200ms until it holds, a daemon dies or timeout
// passes; what is the thing waited for, for the error.
func (w *waiter) poll(ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := w.dead(); err != nil {
			return false, err
		}
		ok, err := cond(ctx)
		if err != nil {
			last = err
			return false, nil
		}
		return ok, nil
	})
	if err != nil && wait.Interrupted(err) {
		if last != nil {
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, err, last)
		}
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return err
}

// socket waits until a unix socket accepts connections.
func (w *waiter) socket(ctx context.Context, what, path string) error {
	return w.poll(ctx, 30*time.Second, what+"'s socket", func(context.Context) (bool, error) {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			return false, err
		}
		return true, c.Close()
	})
}

// apiServer waits for kube-apiserver's /readyz.
func (w *waiter) apiServer(ctx context.Context) error {
	return w.poll(ctx, 90*time.Second, "kube-apiserver /readyz", func(ctx context.Context) (bool, error) {
		var status int
		res := w.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&status)
		if err := res.Error(); err != nil {
			return false, err
		}
		return status == http.StatusOK, nil
	})
}

// node waits for what a workload needs: the Node Ready with its pod CIDR,
// kube-proxy's rules synced (its healthz), and the default namespace's
// ServiceAccount (the token controller runs).
func (w *waiter) node(ctx context.Context, timeout time.Duration) error {
	if err := w.poll(ctx, timeout, "node "+NodeName+" Ready", func(ctx context.Context) (bool, error) {
		n, err := w.client.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, err
		}
		if n.Spec.PodCIDR == "" {
			return false, errors.New("no spec.podCIDR yet")
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status != corev1.ConditionTrue {
					return false, fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
				}
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	if err := w.healthz(ctx, timeout, "kube-proxy", 10256); err != nil {
		return err
	}
	return w.poll(ctx, timeout, "the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := w.client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// healthz waits for a daemon's /healthz on the node's address to answer
// 200.
func (w *waiter) healthz(ctx context.Context, timeout time.Duration, what string, port int) error {
	url := "http://" + NodeIP.Addr().String() + ":" + strconv.Itoa(port) + "/healthz"
	return w.poll(ctx, timeout, what+" "+url, func(ctx context.Context) (bool, error) { return httpOK(ctx, url) })
}

// httpOK says whether a GET of url answers 200.
func httpOK(ctx context.Context, url string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	res, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return false, err
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK, nil
}
