package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// helloImage is the smoke test's workload (testdata/hello), imported with
// Load as the end-to-end test imports the controller's image.
const helloImage = "localhost/ohmlab-cluster/hello:1"

// refusal is testdata/hello's webhook message.
const refusal = "refused by the smoke test's webhook"

// TestSmoke brings a node up, runs a pod from a locally imported image under
// restricted Pod Security, reaches its Service from the host and from
// kube-apiserver (a validating webhook), takes the node down and checks that
// the host is as it was. It needs root and the node binaries: make
// cluster-smoke runs it (CLUSTER_SMOKE=1). -count=3 runs it three times in a
// row.
func TestSmoke(t *testing.T) {
	if os.Getenv("CLUSTER_SMOKE") == "" {
		t.Skip("set CLUSTER_SMOKE=1 (make cluster-smoke): it needs root and brings a node up on this machine")
	}
	k8sBin, err := filepath.Abs(envOr("CLUSTER_K8S_BIN", "../../bin/k8s"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pause := buildStatic(t, "./cmd/pause", filepath.Join(tmp, "pause"))
	hello := buildStatic(t, "./testdata/hello", filepath.Join(tmp, "hello"))
	l := Layout{Dir: filepath.Join(tmp, "state")}

	before := snapshotHost(t, l)
	ctx := t.Context()
	start := time.Now()
	kubeconfig, err := Up(ctx, Options{Layout: l, K8sBin: k8sBin, Pause: pause, Timeout: 2 * time.Minute, Log: testLog{t}})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	upTime := time.Since(start)
	down := func() time.Duration {
		start := time.Now()
		if err := Down(l, testLog{t}); err != nil {
			t.Errorf("down: %v", err)
		}
		return time.Since(start)
	}
	downed := false
	t.Cleanup(func() {
		if !downed {
			down()
		}
	})
	if kubeconfig != l.Kubeconfig() {
		t.Errorf("up printed %s, want %s", kubeconfig, l.Kubeconfig())
	}
	// One cluster at a time: a second up refuses, and leaves the first
	// one alone.
	second := Layout{Dir: filepath.Join(tmp, "second")}
	if _, err := Up(ctx, Options{Layout: second, K8sBin: k8sBin, Pause: pause, Timeout: time.Minute, Log: testLog{t}}); !errors.Is(err, errClusterUp) {
		t.Errorf("a second up: got %v, want %v", err, errClusterUp)
	}
	// ...nor does a down from another state directory take it down.
	if err := Down(second, testLog{t}); !errors.Is(err, errClusterUp) {
		t.Errorf("a down from another state directory: got %v, want %v", err, errClusterUp)
	}

	start = time.Now()
	runWorkload(ctx, t, l, hello)
	workloadTime := time.Since(start)

	downed = true
	downTime := down()
	if diff := cmp.Diff(before, snapshotHost(t, l)); diff != "" {
		t.Errorf("the host after down differs from before up (-before +after):\n%s", diff)
	}
	t.Logf("up %s, workload Running and reached %s, down %s",
		upTime.Round(100*time.Millisecond), workloadTime.Round(100*time.Millisecond), downTime.Round(100*time.Millisecond))
}

// TestSmokeFailedUp: an up that fails (here the kubelet exits at once)
// takes down what it had started, and says which daemon failed.
func TestSmokeFailedUp(t *testing.T) {
	if os.Getenv("CLUSTER_SMOKE") == "" {
		t.Skip("set CLUSTER_SMOKE=1 (make cluster-smoke): it needs root and brings a node up on this machine")
	}
	k8sBin, err := filepath.Abs(envOr("CLUSTER_K8S_BIN", "../../bin/k8s"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	broken := filepath.Join(tmp, "k8s")
	if err := os.Mkdir(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kube-router"} {
		if err := os.Symlink(filepath.Join(k8sBin, b), filepath.Join(broken, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(broken, "kubelet"), []byte("#!/bin/sh\necho 'kubelet: broken on purpose' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pause := buildStatic(t, "./cmd/pause", filepath.Join(tmp, "pause"))
	l := Layout{Dir: filepath.Join(tmp, "state")}
	before := snapshotHost(t, l)
	_, err = Up(t.Context(), Options{Layout: l, K8sBin: broken, Pause: pause, Timeout: time.Minute, Log: testLog{t}})
	if err == nil {
		_ = Down(l, testLog{t})
		t.Fatal("up with a kubelet that exits succeeded")
	}
	if !strings.Contains(err.Error(), "kubelet exited") || !strings.Contains(err.Error(), "broken on purpose") {
		t.Errorf("up's error does not name the kubelet and show its log: %v", err)
	}
	if diff := cmp.Diff(before, snapshotHost(t, l)); diff != "" {
		t.Errorf("the host after a failed up differs from before (-before +after):\n%s", diff)
	}
}

// runWorkload runs testdata/hello behind a Service in a namespace that
// enforces restricted Pod Security, and reaches it from the host and from
// kube-apiserver.
func runWorkload(ctx context.Context, t *testing.T, l Layout, helloBinary string) {
	t.Helper()
	archive := filepath.Join(filepath.Dir(helloBinary), "hello.tar")
	if err := WriteBinaryImage(helloImage, helloBinary, archive); err != nil {
		t.Fatal(err)
	}
	if err := Load(l, "", archive); err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	c := kubernetes.NewForConfigOrDie(cfg)
	const ns = "smoke"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Pod Security admission is on: a pod that sets nothing is refused.
	_, err = c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lax"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: helloImage}}},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity \"restricted:") {
		t.Errorf("creating a pod without a securityContext in a restricted namespace: got %v, want a PodSecurity refusal", err)
	}

	svc, err := c.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "hello"},
			Ports:    []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := NewCA(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(CertRequest{
		CommonName: "hello.smoke.svc", Server: true,
		DNSNames: []string{"hello.smoke.svc"},
		IPs:      []net.IP{net.ParseIP(svc.Spec.ClusterIP)},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hello-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: serving.CertPEM, corev1.TLSPrivateKeyKey: serving.KeyPEM},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, helloPod(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "hello", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return p.Status.Phase == corev1.PodRunning, nil
			}
		}
		return false, nil
	}); err != nil {
		p, _ := c.CoreV1().Pods(ns).Get(ctx, "hello", metav1.GetOptions{})
		t.Fatalf("pod hello Running and Ready: %v; status %+v\nkubelet: %s", err, p.Status, LogTail(l, "kubelet", 20))
	}

	// From the host: through the ClusterIP (kube-proxy's rules in the
	// node's namespace).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, "443") + "/"
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := hc.Get(url)
		if err != nil {
			return false, nil
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return err == nil && string(b) == "hello\n", nil
	}); err != nil {
		t.Errorf("GET %s from the host: %v", url, err)
	}

	// From the pod: kube-apiserver through the kubernetes Service, with
	// the pod's ServiceAccount token (what the controller does).
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := hc.Get(url + "kubernetes")
		if err != nil {
			return false, nil
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s: %s", res.Status, b)
			return false, nil
		}
		return strings.Contains(string(b), `"gitVersion"`), nil
	}); err != nil {
		t.Errorf("kube-apiserver's /version from the pod through the kubernetes Service: %v (last: %v)", err, last)
	}

	// From the pod: a server on the host bound to the host's end of the
	// link (where the end-to-end test may run Vault).
	ln, err := net.Listen("tcp", net.JoinHostPort(HostIP.Addr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	hostSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "from the host") })}
	go func() { _ = hostSrv.Serve(ln) }()
	defer hostSrv.Close()
	getURL := url + "get?url=" + neturl.QueryEscape("http://"+ln.Addr().String()+"/")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		res, err := hc.Get(getURL)
		if err != nil {
			return false, nil
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		last = fmt.Errorf("%s: %s", res.Status, b)
		return err == nil && string(b) == "from the host", nil
	}); err != nil {
		t.Errorf("a server on the host at %s from the pod: %v (last: %v)", ln.Addr(), err, last)
	}

	// From kube-apiserver: a validating webhook served by the Service.
	if _, err := c.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "ohmlab-cluster-smoke"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "refuse.smoke.ohmlab.fr",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service:  &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "hello", Path: ptr.To("/validate"), Port: ptr.To[int32](443)},
				CABundle: ca.PEM,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"smoke": "refuse"}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			TimeoutSeconds:          ptr.To[int32](5),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			GenerateName: "refused-", Labels: map[string]string{"smoke": "refuse"},
		}}, metav1.CreateOptions{})
		return last != nil && strings.Contains(last.Error(), refusal), nil
	}); err != nil {
		t.Errorf("a ConfigMap the webhook refuses: %v (last answer: %v)", err, last)
	}
}

func helloPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "hello",
				Image:           helloImage,
				ImagePullPolicy: corev1.PullNever,
				Ports:           []corev1.ContainerPort{{Name: "https", ContainerPort: 8443}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: "/", Port: intstr.FromInt32(8443), Scheme: corev1.URISchemeHTTPS,
				}}, PeriodSeconds: 1},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hello-tls"}}}},
		},
	}
}

// hostState is what the node must leave as it found it.
type hostState struct {
	Sysctls map[string]string
	// Paths says which of HostPaths, the record, its lock and the
	// namespace exist.
	Paths map[string]bool
	// Mounts are every mount point of the host's mount namespace.
	Mounts []string
	// Links are the host's network interfaces; Routes its routing table;
	// Ruleset its iptables rules (iptables-save, without the timestamps
	// and counters); IPSets its ipsets' names (kube-router's are the
	// node's, never the host's).
	Links   []string
	Routes  string
	Ruleset string
	IPSets  string
	// Cgroups are the kubepods and daemon cgroups in any hierarchy.
	Cgroups []string
	// Processes are those whose command line names the state directory
	// (the daemons, containerd's shims).
	Processes []string
}

func snapshotHost(t *testing.T, l Layout) hostState {
	t.Helper()
	s := hostState{Paths: map[string]bool{}}
	var err error
	if s.Sysctls, err = SnapshotSysctls(); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(append([]string{}, HostPaths...), RecordPath, lockPath, NetNSPath()) {
		s.Paths[p] = exists(p)
	}
	if s.Mounts, err = mountPoints([]string{"/"}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(s.Mounts)
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range links {
		s.Links = append(s.Links, e.Name())
	}
	out, err := exec.Command("ip", "route", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	s.Routes = string(out)
	if out, err = exec.Command("iptables-save").Output(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, "#") {
			s.Ruleset += counters.ReplaceAllString(line, "") + "\n"
		}
	}
	if out, err = exec.Command("ipset", "list", "-n").Output(); err != nil {
		t.Fatal(err)
	}
	s.IPSets = string(out)
	for _, c := range []string{KubepodsCgroup, DaemonCgroup} {
		dirs, err := cgroupDirs(c)
		if err != nil {
			t.Fatal(err)
		}
		s.Cgroups = append(s.Cgroups, dirs...)
	}
	s.Processes = processesNaming(t, l.Dir)
	return s
}

// counters are iptables-save's packet and byte counts.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

func processesNaming(t *testing.T, s string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if cmdline := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmdline, s) {
			found = append(found, fmt.Sprintf("%d %s", pid, cmdline))
		}
	}
	return found
}

func buildStatic(t *testing.T, pkg, out string) string {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// testLog sends up's and down's progress lines to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		w.t.Log(sc.Text())
	}
	return len(p), nil
}
