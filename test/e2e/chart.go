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
	objs, err := charttest.RenderE(e.values(), charttest.Options{Namespace: ControllerNamespace})
	if err != nil {
		return fmt.Errorf("rendering the chart: %w", err)
	}
	if e.Chart, err = readFacts(objs); err != nil {
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
	if e.opts.CertManager == nil {
		return e.issueServingCertificate(ctx)
	}
	return nil
}

// apply server-side applies one object as the admin, like Helm.
func (e *Env) apply(ctx context.Context, o *Object) error {
	if err := e.CP.Client.Patch(ctx, o, client.Apply, client.ForceOwnership, client.FieldOwner("helm")); err != nil {
		return fmt.Errorf("installing %s: %w", charttest.Key(*o), err)
	}
	return nil
}

func readFacts(objs []Object) (ChartFacts, error) {
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
	if len(f.DNSNames) == 0 {
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ohmlab-e2e-ca"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: e.Chart.DNSNames[0]}, DNSNames: e.Chart.DNSNames,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ControllerNamespace, Name: e.Chart.WebhookSecret},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":  caPEM,
		},
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
