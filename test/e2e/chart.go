package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"path/filepath"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/charts/charttest"
)

// Object is one rendered object of the chart.
type Object = unstructured.Unstructured

// ChartFacts are what the environment reads from the chart's rendered
// objects to run the controller as its Deployment would.
type ChartFacts struct {
	// Deployment, ServiceAccount and ConfigMap of the Vault target's process.
	Deployment, ServiceAccount, ConfigMap string
	// Args are the controller container's arguments, Env its environment
	// variables with a literal value (KEY=value; the ones from the
	// Downward API are the environment's own, see startReplica).
	Args, Env []string
	// VaultTokenMount is where the Deployment mounts the projected Vault
	// token, VaultAudience and VaultTokenTTL its audience and lifetime.
	VaultTokenMount string
	VaultAudience   string
	VaultTokenTTL   time.Duration
	// WebhookService is the webhook Service's name, WebhookSecret the
	// Secret the Deployment mounts as the webhook's serving certificate,
	// WebhookConfiguration the ValidatingWebhookConfiguration.
	WebhookService, WebhookSecret, WebhookConfiguration string
	// DNSNames are the serving certificate's names (the Certificate's).
	DNSNames []string
	// Shards are the Deployments of the Vault target's shards
	// (targets.vault.shards), by shard name; they run as ServiceAccount too.
	Shards map[string]ShardFacts
}

// ShardFacts are what the environment reads from the Deployment of a shard.
type ShardFacts struct {
	Deployment, ConfigMap string
	// Args and Env are as ChartFacts'.
	Args, Env []string
}

// installChart renders the chart, installs its objects as `helm install`
// would (server-side apply, in Helm's order) and reads the facts the
// controller's process needs.
func (e *Env) installChart(ctx context.Context) error {
	values := e.values()
	renderOpts := charttest.Options{Namespace: ControllerNamespace}
	if e.opts.OwnCertificate {
		if e.opts.CertManager != nil {
			return errors.New("the environment's options OwnCertificate and CertManager exclude each other")
		}
		own, err := e.storeOwnCertificate(ctx, values)
		if err != nil {
			return err
		}
		values = mergeValues(values, own)
		// As on a cluster without cert-manager: the chart must take the user's certificate.
		renderOpts.WithoutCertManager = true
	}
	objs, err := charttest.RenderE(values, renderOpts)
	if err != nil {
		return fmt.Errorf("rendering the chart: %w", err)
	}
	if e.Chart, err = readFacts(objs, e.opts.OwnCertificate); err != nil {
		return err
	}
	if e.opts.CertManager == nil {
		// No cert-manager CRDs to install Issuers and Certificates with.
		objs = charttest.Core(objs)
	}
	e.Objects = objs
	e.logf("installing the chart's %d objects (release %s in %s)", len(objs), charttest.ReleaseName, ControllerNamespace)
	for _, ns := range charttest.Namespaces(objs) {
		if err := e.CP.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for i := range objs {
		if err := e.apply(ctx, objs[i].DeepCopy()); err != nil {
			return err
		}
	}
	svc := &corev1.Service{}
	if err := e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: e.Chart.WebhookService}, svc); err != nil {
		return err
	}
	e.WebhookService = fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
	if e.opts.CertManager == nil && !e.opts.OwnCertificate {
		return e.issueServingCertificate(ctx)
	}
	return nil
}

// OwnCertificateSecret is the Secret of the serving certificate the
// environment brings with Options.OwnCertificate.
const OwnCertificateSecret = "platform-webhook-tls"

// storeOwnCertificate does what a user who brings the webhook's serving
// certificate does before installing the chart: a CA of their own signs a
// certificate for the webhook Service's name, stored in a kubernetes.io/tls
// Secret of the release namespace. It returns the values that name the
// Secret and carry the CA (webhook.certificate).
func (e *Env) storeOwnCertificate(ctx context.Context, values map[string]any) (map[string]any, error) {
	// The Service's name, from a render as the chart would be installed.
	objs, err := charttest.RenderE(values, charttest.Options{Namespace: ControllerNamespace})
	if err != nil {
		return nil, fmt.Errorf("rendering the chart: %w", err)
	}
	services := charttest.Filter(objs, "Service")
	if len(services) != 1 {
		return nil, fmt.Errorf("the chart renders %d Services, want the webhook's", len(services))
	}
	svc := services[0].GetName() + "." + ControllerNamespace + ".svc"
	if e.ownCA, err = newCertAuthority("ohmlab-e2e-own-ca"); err != nil {
		return nil, err
	}
	e.ownDNSNames = []string{svc, svc + ".cluster.local"}
	if err := e.CP.EnsureNamespace(ctx, ControllerNamespace); err != nil {
		return nil, err
	}
	crt, key, err := e.ownCA.issue(e.ownDNSNames)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ControllerNamespace, Name: OwnCertificateSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key},
	}
	if err := e.CP.Client.Create(ctx, secret); err != nil {
		return nil, fmt.Errorf("storing the serving certificate: %w", err)
	}
	return map[string]any{"webhook": map[string]any{"certificate": map[string]any{
		"secretName": OwnCertificateSecret, "caBundle": string(e.ownCA.pem),
	}}}, nil
}

// RenewOwnCertificate replaces the certificate of Options.OwnCertificate
// with a new one from the same CA, as its owner renews it, and returns the
// new certificate (PEM).
func (e *Env) RenewOwnCertificate(ctx context.Context) ([]byte, error) {
	if e.ownCA == nil {
		return nil, errors.New("the environment brings no serving certificate of its own (Options.OwnCertificate)")
	}
	crt, key, err := e.ownCA.issue(e.ownDNSNames)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{}
	if err := e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: OwnCertificateSecret}, secret); err != nil {
		return nil, err
	}
	secret.Data = map[string][]byte{"tls.crt": crt, "tls.key": key}
	if err := e.CP.Client.Update(ctx, secret); err != nil {
		return nil, fmt.Errorf("renewing the serving certificate: %w", err)
	}
	return crt, nil
}

// certAuthority signs serving certificates for a run.
type certAuthority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	serial int64
}

func newCertAuthority(name string) (*certAuthority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}, nil
}

// issue signs a serving certificate for dnsNames, with a serial of its own;
// it returns the certificate and its key (PEM).
func (ca *certAuthority) issue(dnsNames []string) (crtPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	ca.serial++
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(ca.serial), Subject: pkix.Name{CommonName: dnsNames[0]}, DNSNames: dnsNames,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// apply server-side applies one object as the admin, like Helm.
func (e *Env) apply(ctx context.Context, o *Object) error {
	if err := e.CP.Client.Patch(ctx, o, client.Apply, client.ForceOwnership, client.FieldOwner("helm")); err != nil {
		return fmt.Errorf("installing %s: %w", charttest.Key(*o), err)
	}
	return nil
}

// readFacts reads the facts from the rendered objects; ownCertificate: the
// chart was given the webhook's serving certificate (no Certificate renders).
func readFacts(objs []Object, ownCertificate bool) (ChartFacts, error) {
	var f ChartFacts
	var deps []appsv1.Deployment
	for _, o := range charttest.Filter(objs, "Deployment") {
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			return f, err
		}
		shard, ok := d.Labels[ohmlabv1alpha1.ShardLabel]
		if !ok {
			deps = append(deps, d)
			continue
		}
		if f.Shards == nil {
			f.Shards = map[string]ShardFacts{}
		}
		pod := d.Spec.Template.Spec
		sf := ShardFacts{Deployment: d.Name, Args: pod.Containers[0].Args, Env: literalEnv(pod.Containers[0].Env)}
		for _, v := range pod.Volumes {
			if v.Projected != nil && len(v.Projected.Sources) > 0 && v.Projected.Sources[0].ConfigMap != nil {
				sf.ConfigMap = v.Projected.Sources[0].ConfigMap.Name
			}
		}
		f.Shards[shard] = sf
	}
	if len(deps) != 1 {
		return f, fmt.Errorf("the chart renders %d Deployments besides the shards', want the Vault target's only", len(deps))
	}
	dep := deps[0]
	f.Deployment = dep.Name
	pod := dep.Spec.Template.Spec
	f.ServiceAccount = pod.ServiceAccountName
	f.Args, f.Env = pod.Containers[0].Args, literalEnv(pod.Containers[0].Env)
	mounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	for _, v := range pod.Volumes {
		switch {
		case v.Secret != nil:
			f.WebhookSecret = v.Secret.SecretName
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				switch {
				case src.ServiceAccountToken != nil:
					f.VaultTokenMount = mounts[v.Name]
					f.VaultAudience = src.ServiceAccountToken.Audience
					f.VaultTokenTTL = time.Duration(*src.ServiceAccountToken.ExpirationSeconds) * time.Second
				case src.ConfigMap != nil && f.ConfigMap == "":
					f.ConfigMap = src.ConfigMap.Name
				}
			}
		}
	}
	for _, svc := range charttest.Filter(objs, "Service") {
		f.WebhookService = svc.GetName()
	}
	for _, w := range charttest.Filter(objs, "ValidatingWebhookConfiguration") {
		f.WebhookConfiguration = w.GetName()
	}
	for _, c := range charttest.Filter(objs, "Certificate") {
		if name, _, _ := unstructured.NestedString(c.Object, "spec", "secretName"); name == f.WebhookSecret {
			f.DNSNames, _, _ = unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
		}
	}
	if len(f.DNSNames) == 0 && !ownCertificate {
		return f, fmt.Errorf("the chart renders no Certificate for the webhook Secret %s", f.WebhookSecret)
	}
	for shard, sf := range f.Shards {
		for _, o := range charttest.Filter(objs, "Deployment") {
			if o.GetName() == sf.Deployment {
				if sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName"); sa != f.ServiceAccount {
					return f, fmt.Errorf("the Deployment of shard %s runs as %s, not as the target's ServiceAccount %s", shard, sa, f.ServiceAccount)
				}
			}
		}
		if sf.ConfigMap == "" {
			return f, fmt.Errorf("the Deployment of shard %s mounts no ConfigMap", shard)
		}
	}
	for what, v := range map[string]string{
		"ServiceAccount": f.ServiceAccount, "ConfigMap": f.ConfigMap, "Vault token mount": f.VaultTokenMount,
		"webhook Secret": f.WebhookSecret, "webhook Service": f.WebhookService, "webhook configuration": f.WebhookConfiguration,
	} {
		if v == "" {
			return f, fmt.Errorf("the chart's Deployment %s has no %s", dep.Name, what)
		}
	}
	return f, nil
}

// issueServingCertificate does cert-manager's and cainjector's work when
// they do not run: a CA made for this run signs a serving certificate for
// the names of the chart's Certificate, stored in its Secret (tls.crt,
// tls.key, ca.crt), and the CA becomes the webhook configuration's
// caBundle.
func (e *Env) issueServingCertificate(ctx context.Context) error {
	ca, err := newCertAuthority("ohmlab-e2e-ca")
	if err != nil {
		return err
	}
	crt, key, err := ca.issue(e.Chart.DNSNames)
	if err != nil {
		return err
	}
	caPEM := ca.pem
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ControllerNamespace, Name: e.Chart.WebhookSecret},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": caPEM},
	}
	if err := e.CP.Client.Create(ctx, secret); err != nil {
		return fmt.Errorf("storing the serving certificate: %w", err)
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := e.CP.Client.Get(ctx, client.ObjectKey{Name: e.Chart.WebhookConfiguration}, vwc); err != nil {
		return err
	}
	before := vwc.DeepCopy()
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = caPEM
	}
	return e.CP.Client.Patch(ctx, vwc, client.MergeFrom(before))
}

// startVolumes writes what the kubelet would give the controller's pod and
// keeps it fresh: the ServiceAccount's API token (behind a kubeconfig),
// the projected Vault token, the ConfigMap's config.yaml and the webhook
// Secret's files.
func (e *Env) startVolumes(ctx, bg context.Context) error {
	dir := e.opts.Dir
	apiToken := filepath.Join(dir, "pod", "serviceaccount", "token")
	e.TokenFile = filepath.Join(dir, "pod", "vault-token", "token")
	e.CertDir = filepath.Join(dir, "pod", "webhook-certs")
	e.Config = filepath.Join(dir, "pod", "config", "config.yaml")

	tokens := []struct {
		file, audience string
		ttl            time.Duration
	}{
		{file: apiToken, ttl: time.Hour},
		{file: e.TokenFile, audience: e.Chart.VaultAudience, ttl: e.Chart.VaultTokenTTL},
	}
	for _, t := range tokens {
		refresh := func(ctx context.Context) error {
			jwt, err := e.CP.ServiceAccountToken(ctx, ControllerNamespace, e.Chart.ServiceAccount, t.audience, t.ttl)
			if err != nil {
				return err
			}
			return writeAtomic(t.file, []byte(jwt))
		}
		if err := refresh(ctx); err != nil {
			return err
		}
		// The kubelet replaces a projected token at 80 % of its life.
		e.every(bg, t.ttl*8/10, "refreshing a ServiceAccount token", refresh)
	}
	e.Kubeconfig = filepath.Join(dir, "controller.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: e.CP.Config.Host, CertificateAuthorityData: e.CP.Config.CAData}
	kc.AuthInfos[e.Chart.ServiceAccount] = &clientcmdapi.AuthInfo{TokenFile: apiToken}
	kc.Contexts["pod"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: e.Chart.ServiceAccount, Namespace: ControllerNamespace}
	kc.CurrentContext = "pod"
	if err := clientcmd.WriteToFile(*kc, e.Kubeconfig); err != nil {
		return err
	}

	cm := &corev1.ConfigMap{}
	if err := e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: e.Chart.ConfigMap}, cm); err != nil {
		return err
	}
	if err := writeAtomic(e.Config, []byte(cm.Data["config.yaml"])); err != nil {
		return err
	}
	e.ShardConfigs = map[string]string{}
	for shard, sf := range e.Chart.Shards {
		cm := &corev1.ConfigMap{}
		if err := e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: sf.ConfigMap}, cm); err != nil {
			return err
		}
		e.ShardConfigs[shard] = filepath.Join(dir, "pod-shard-"+shard, "config", "config.yaml")
		if err := writeAtomic(e.ShardConfigs[shard], []byte(cm.Data["config.yaml"])); err != nil {
			return err
		}
	}

	if e.opts.CertManager != nil {
		e.logf("waiting for cert-manager to issue Secret %s and inject the caBundle of %s", e.Chart.WebhookSecret, e.Chart.WebhookConfiguration)
	}
	var last []byte
	syncCerts := func(ctx context.Context) error {
		s := &corev1.Secret{}
		if err := e.CP.Client.Get(ctx, client.ObjectKey{Namespace: ControllerNamespace, Name: e.Chart.WebhookSecret}, s); err != nil {
			if apierrors.IsNotFound(err) {
				return errNotFound
			}
			return err
		}
		crt, key := s.Data["tls.crt"], s.Data["tls.key"]
		if len(crt) == 0 || len(key) == 0 {
			return errNotFound
		}
		if bytes.Equal(last, append(slices.Clone(crt), key...)) {
			return nil
		}
		if err := writeAtomic(filepath.Join(e.CertDir, "tls.key"), key); err != nil {
			return err
		}
		if err := writeAtomic(filepath.Join(e.CertDir, "tls.crt"), crt); err != nil {
			return err
		}
		last = append(slices.Clone(crt), key...)
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := syncCerts(ctx); err != nil {
			return false, nil
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := e.CP.Client.Get(ctx, client.ObjectKey{Name: e.Chart.WebhookConfiguration}, vwc); err != nil {
			return false, nil
		}
		return len(vwc.Webhooks) > 0 && len(vwc.Webhooks[0].ClientConfig.CABundle) > 0, nil
	})
	if err != nil {
		return fmt.Errorf("the webhook's serving certificate (Secret %s/%s) and caBundle never appeared: %w", ControllerNamespace, e.Chart.WebhookSecret, err)
	}
	// The kubelet syncs a secret volume about once a minute; quicker here.
	e.every(bg, time.Second, "syncing the webhook certificate files", func(ctx context.Context) error {
		if err := syncCerts(ctx); err != nil && err != errNotFound {
			return err
		}
		return nil
	})
	return nil
}

// literalEnv returns the variables of env that have a literal value, as
// KEY=value.
func literalEnv(env []corev1.EnvVar) []string {
	var out []string
	for _, v := range env {
		if v.ValueFrom == nil {
			out = append(out, v.Name+"="+v.Value)
		}
	}
	return out
}
