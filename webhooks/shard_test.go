package webhooks_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/webhooks"
)

// TestShardLabelWarns: an object whose ohmlab.fr/shard label is empty, or
// not a shard name, is admitted with a warning (no process reconciles it), on
// a create and on an update of its metadata only; a shard's name or no label
// gives none.
func TestShardLabelWarns(t *testing.T) {
	const notAName = `metadata.labels[ohmlab.fr/shard]: "NoSuchShard" is not a shard name (a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')): no process can run it, so no process reconciles this object; name a shard of targets.vault.shards`
	const warning = "metadata.labels[ohmlab.fr/shard]: empty: no process reconciles this object (the controller's process without a shard takes only objects without the label); remove the label or name a shard of targets.vault.shards"
	labelled := func(labels map[string]string) *ohmlabv1alpha1.VaultSeed {
		s := seed("a", "ohmlab/a", `{"k":"<random:8>"}`)
		s.Labels = labels
		return s
	}
	tests := []struct {
		name         string
		op           admissionv1.Operation
		obj, old     *ohmlabv1alpha1.VaultSeed
		wantWarnings []string
	}{
		{name: "create, empty label", op: admissionv1.Create, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: ""}), wantWarnings: []string{warning}},
		{name: "create, not a shard name", op: admissionv1.Create, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "NoSuchShard"}), wantWarnings: []string{notAName}},
		{name: "moved to a label that is not a shard name", op: admissionv1.Update, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "NoSuchShard"}), old: labelled(nil), wantWarnings: []string{notAName}},
		{name: "create, a shard", op: admissionv1.Create, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "a"})},
		{name: "create, no label", op: admissionv1.Create, obj: labelled(nil)},
		{name: "label emptied, spec unchanged", op: admissionv1.Update, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: ""}), old: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "a"}), wantWarnings: []string{warning}},
		{name: "moved to another shard", op: admissionv1.Update, obj: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "b"}), old: labelled(map[string]string{ohmlabv1alpha1.ShardLabel: "a"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns}, webhooks.AllowDelete(true))
			resp := wh.Handle(context.Background(), request(t, tt.op, "", tt.obj, tt.old))
			if !resp.Allowed {
				t.Fatalf("refused: %s", resp.Result.Message)
			}
			if diff := cmp.Diff(tt.wantWarnings, []string(resp.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnrunShardWarns: with the list of the shards that run, an object
// labelled with another shard is admitted with a warning naming those that
// run, on a create, an update of its spec and an update of its metadata
// only; without the list (an older chart's configuration), no warning
// (issue 23, item 7).
func TestUnrunShardWarns(t *testing.T) {
	const unrun = `metadata.labels[ohmlab.fr/shard]: "c" is not a shard that runs: no process reconciles this object; the shards that run: a, b; name one of them, or remove the label for the process without a shard`
	labelled := func(shard, data string) *ohmlabv1alpha1.VaultSeed {
		s := seed("a", "ohmlab/a", data)
		if shard != "-" {
			s.Labels = map[string]string{ohmlabv1alpha1.ShardLabel: shard}
		}
		return s
	}
	const data, other = `{"k":"<random:8>"}`, `{"k":"<random:8>","j":"x"}`
	tests := []struct {
		name         string
		running      []string
		op           admissionv1.Operation
		obj, old     *ohmlabv1alpha1.VaultSeed
		wantWarnings []string
	}{
		{name: "create, a shard that does not run", running: []string{"a", "b"}, op: admissionv1.Create, obj: labelled("c", data), wantWarnings: []string{unrun}},
		{name: "spec update, a shard that does not run", running: []string{"a", "b"}, op: admissionv1.Update, obj: labelled("c", other), old: labelled("c", data), wantWarnings: []string{unrun}},
		{name: "moved to a shard that does not run", running: []string{"a", "b"}, op: admissionv1.Update, obj: labelled("c", data), old: labelled("a", data), wantWarnings: []string{unrun}},
		{name: "no shard runs", running: []string{}, op: admissionv1.Create, obj: labelled("a", data),
			wantWarnings: []string{`metadata.labels[ohmlab.fr/shard]: "a" is not a shard that runs: no process reconciles this object; the shards that run: none (targets.vault.shards is empty); name one of them, or remove the label for the process without a shard`}},
		{name: "a shard that runs", running: []string{"a", "b"}, op: admissionv1.Create, obj: labelled("b", data)},
		{name: "no label", running: []string{"a", "b"}, op: admissionv1.Create, obj: labelled("-", data)},
		{name: "no list: no warning rather than a false one", op: admissionv1.Create, obj: labelled("c", data)},
		{name: "not a shard name: one warning, not two", running: []string{"a"}, op: admissionv1.Update, obj: labelled("", data), old: labelled("a", data),
			wantWarnings: []string{"metadata.labels[ohmlab.fr/shard]: empty: no process reconciles this object (the controller's process without a shard takes only objects without the label); remove the label or name a shard of targets.vault.shards"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wh := webhooks.NewWebhook(newScheme(t), cache(t, nil, nil), []string{ns}, webhooks.AllowDelete(true), webhooks.Shards(tt.running))
			resp := wh.Handle(context.Background(), request(t, tt.op, "", tt.obj, tt.old))
			if !resp.Allowed {
				t.Fatalf("refused: %s", resp.Result.Message)
			}
			if diff := cmp.Diff(tt.wantWarnings, []string(resp.Warnings)); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
