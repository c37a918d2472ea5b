package cluster

import (
	"context"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// noSecretInLogs: the logs of every controller pod of the run (the ones
// the rollout, the drain and the delete removed too) hold none of the
// generated values nor the webhook's private key.
func (e *env) noSecretInLogs(t *testing.T) {
	ctx := t.Context()
	if err := e.logs.Keep(ctx); err != nil {
		t.Fatal(err)
	}
	secrets := append([]Secret(nil), e.secrets...)
	tlsKey, err := e.webhookKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secrets = append(secrets, tlsKey...)
	logs := e.logs.Logs()
	// Two pods at the install, two from the rollout, two from the drain, one replacing the deleted one.
	if len(logs) < 7 || len(secrets) < 5 {
		t.Fatalf("kept the logs of %d pods and %d secret values, want those of the whole run (7 pods, 5 values)", len(logs), len(secrets))
	}
	mentions := 0
	for pod, l := range logs {
		if strings.Contains(l, keycloakName) {
			mentions++
		}
		for _, s := range secrets {
			if strings.Contains(l, s.Value) {
				t.Errorf("pod %s logged a secret value: %s", pod, s.What)
			}
		}
	}
	// The control: the logs searched are those of the pods that handled the values.
	if mentions == 0 {
		t.Errorf("no pod's logs mention %s: the logs searched are not those of the reconciles", keycloakName)
	}
	size := 0
	for _, l := range logs {
		size += len(l)
	}
	t.Logf("searched the logs of %d pods (%d bytes, %d mention %s) for %d secret values", len(logs), size, mentions, keycloakName, len(secrets))
}

// webhookKey is the webhook's serving key, as lines of its PEM body.
func (e *env) webhookKey(ctx context.Context) ([]Secret, error) {
	var name string
	for _, v := range e.dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			name = v.Secret.SecretName
		}
	}
	s := &corev1.Secret{}
	if err := e.c.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, s); err != nil {
		return nil, fmt.Errorf("reading the webhook's Secret %q: %w", name, err)
	}
	block, _ := pem.Decode(s.Data["tls.key"])
	if block == nil {
		return nil, fmt.Errorf("Secret %s has no PEM tls.key", name)
	}
	var out []Secret
	for i, line := range strings.Split(strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: block.Type, Bytes: block.Bytes}))), "\n") {
		if !strings.HasPrefix(line, "-----") {
			out = append(out, Secret{What: fmt.Sprintf("the webhook's private key (Secret %s, line %d)", name, i), Value: line})
		}
	}
	return out, nil
}
