package validate_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
	"github.com/ohmlab/ohmlab-controller/internal/validate"
	"github.com/ohmlab/ohmlab-controller/internal/validate/validatetest"
	"github.com/ohmlab/ohmlab-controller/templating"
)

// secret is a plain value that must never appear in a message.
const secret = "s3cr3t-typed-by-hand"

func seed(name, path, data string) *ohmlabv1alpha1.VaultSeed {
	s := &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vo", Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path},
	}
	if data != "" {
		s.Spec.Data = &apiextensionsv1.JSON{Raw: []byte(data)}
	}
	return s
}

func withRotate(s *ohmlabv1alpha1.VaultSeed, token string, keys ...string) *ohmlabv1alpha1.VaultSeed {
	s.Spec.Rotate = &ohmlabv1alpha1.Rotation{Token: token, Keys: keys}
	return s
}

// keys sums a verdict up as "<key> <reason>" per problem and "<key>
// warning" per warning.
func keys(v validate.Verdict) []string {
	var out []string
	for _, p := range v.Problems {
		out = append(out, p.Key+" "+p.Reason)
	}
	for _, w := range v.Warnings {
		out = append(out, w.Key+" warning")
	}
	return out
}

func noSecret(t *testing.T, vs ...validate.Verdict) {
	t.Helper()
	for _, v := range vs {
		for _, p := range append(v.Problems, v.Warnings...) {
			if strings.Contains(p.String(), secret) {
				t.Errorf("a message holds a value: %s", p)
			}
		}
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		name string
		objs []*ohmlabv1alpha1.VaultSeed
		want [][]string
	}{
		{
			name: "a valid object",
			objs: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/a", `{"admin":{"user":"`+secret+`","password":"<random:24>","hash":"<bcrypt:admin.password>"}}`)},
			want: [][]string{nil},
		},
		{
			name: "problems of one object are named by their data key",
			objs: []*ohmlabv1alpha1.VaultSeed{withRotate(seed("a", "ohmlab/a", `{"a.b":"x","l":[1],"n":null,"t":"<random:0>","h":"<bcrypt:nope>","p":"`+secret+`"}`), "1", "p")},
			want: [][]string{{"a.b InvalidSpec", "h InvalidSpec", "l InvalidSpec", "n InvalidSpec", "p InvalidRotation", "t InvalidSpec"}},
		},
		{
			name: "a deletionPolicy the API server would refuse",
			objs: []*ohmlabv1alpha1.VaultSeed{func() *ohmlabv1alpha1.VaultSeed {
				s := seed("a", "ohmlab/a", `{"k":"v"}`)
				s.Spec.DeletionPolicy = "Nuke"
				return s
			}()},
			want: [][]string{{"spec.deletionPolicy InvalidSpec"}},
		},
		{
			name: "problems not about one key are named by their field",
			objs: []*ohmlabv1alpha1.VaultSeed{
				withRotate(seed("a", "nomount", `{"":"x"}`), ""),
				seed("b", "ohmlab/b", `"a string"`),
			},
			want: [][]string{
				{"spec.data InvalidSpec", "spec.path InvalidSpec", "spec.rotate InvalidRotation", "spec.rotate warning"},
				{"spec.data InvalidSpec"},
			},
		},
		{
			name: "two objects on one path and a repeated name",
			objs: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/x", ""), seed("b", "ohmlab/x", ""), seed("a", "ohmlab/y", "")},
			want: [][]string{
				{"metadata.name DuplicateName", "spec.path DuplicatePath"},
				{"spec.path DuplicatePath"},
				{"metadata.name DuplicateName"},
			},
		},
		{
			name: "a reference ring is reported on every object of the ring only",
			objs: []*ohmlabv1alpha1.VaultSeed{
				seed("a", "ohmlab/a", `{"k":"<ref:ohmlab/b#k>"}`),
				seed("b", "ohmlab/b", `{"k":"<ref:ohmlab/a#k>"}`),
				seed("c", "ohmlab/c", `{"k":"<ref:ohmlab/a#k>"}`),
			},
			want: [][]string{{"k RefCycle"}, {"k RefCycle"}, nil},
		},
		{
			name: "a template with white space around it is a warning: it would be written as text",
			objs: []*ohmlabv1alpha1.VaultSeed{seed("a", "ohmlab/a", `{"a":" <random:8>","b":{"c":"<uuid> "},"ok":"<random:8>"}`)},
			want: [][]string{{"a warning", "b.c warning"}},
		},
		{
			name: "a rotate block without keys on an object with no generated key is a warning",
			objs: []*ohmlabv1alpha1.VaultSeed{
				withRotate(seed("a", "ohmlab/a", `{"p":"`+secret+`"}`), "1"),
				withRotate(seed("b", "ohmlab/b", `{"p":"<uuid>"}`), "1"),
			},
			want: [][]string{{"spec.rotate warning"}, nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := validate.Set(analyseAll(tt.objs))
			var got [][]string
			for _, v := range vs {
				got = append(got, keys(v))
				if v.Valid() != (len(v.Problems) == 0) {
					t.Errorf("Valid() = %v with %d problems", v.Valid(), len(v.Problems))
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
			noSecret(t, vs...)
		})
	}
}

func TestSeed(t *testing.T) {
	tests := []struct {
		name      string
		seed, old *ohmlabv1alpha1.VaultSeed
		others    []*ohmlabv1alpha1.VaultSeed
		want      validate.Verdict
	}{
		{
			name: "create: the verdict of the set on the object",
			seed: seed("b", "ohmlab/x", `{"k":"<ref:ohmlab/y#k>"}`),
			others: []*ohmlabv1alpha1.VaultSeed{
				seed("a", "ohmlab/x", ""),
				seed("c", "ohmlab/y", `{"k":"<ref:ohmlab/x#k>"}`),
			},
			want: validate.Verdict{Problems: []validate.Problem{
				{Reason: "RefCycle", Key: "k", Message: "reference cycle: ohmlab/x -> ohmlab/y -> ohmlab/x"},
				{Reason: "DuplicatePath", Key: "spec.path", Message: "path ohmlab/x is also declared by vo/a"},
			}},
		},
		{
			name: "a path that is not one Vault path: the CRD's message",
			seed: seed("a", "ohmlab/platforms/../x", `{"k":"<ref:ohmlab/a b#k>","t":" <uuid>"}`),
			want: validate.Verdict{
				Problems: []validate.Problem{
					{Reason: "InvalidSpec", Key: "k", Message: validatetest.RefPathMessage("ohmlab/a b")},
					{Reason: "InvalidSpec", Key: "spec.path", Message: templating.PathMessage},
				},
				Warnings: []validate.Problem{{Key: "t", Message: "is plain text, not the template <uuid>: with the white space around it the controller writes the text as it is; remove the white space to generate the value"}},
			},
		},
		{
			name: "update: spec.path is immutable",
			seed: seed("a", "ohmlab/new", ""),
			old:  seed("a", "ohmlab/old", ""),
			want: validate.Verdict{Problems: []validate.Problem{{Reason: "InvalidSpec", Key: "spec.path",
				Message: "changed from ohmlab/old to ohmlab/new: spec.path is immutable, delete the object and create another"}}},
		},
		{
			name: "update: changed plain values and templates are warnings, references and derived keys are not",
			seed: seed("a", "ohmlab/a", `{"p":"`+secret+`2","r":"<random:32>","ref":"<ref:ohmlab/b#y>","h":"<bcrypt:r>","same":"<uuid>","new":"<uuid>"}`),
			old:  seed("a", "ohmlab/a", `{"p":"`+secret+`","r":"<random:24>","ref":"<ref:ohmlab/b#x>","h":"<bcrypt:p>","same":"<uuid>"}`),
			want: validate.Verdict{Warnings: []validate.Problem{
				{Key: "p", Message: "the declared value changed, but the controller seeds once and keeps the value already on the path: change it in Vault"},
				{Key: "r", Message: "now declared as <random:32>, but the controller seeds once and keeps the value already on the path: list the key in rotate.keys and change rotate.token to regenerate it"},
			}},
		},
		{
			name:   "a composed value is admitted without warning, a cycle through it is RefCycle, a malformed one names its key and not its text",
			seed:   seed("b", "ohmlab/x", `{"url":"postgres://app:<ref:ohmlab/y#k>@db:5432/app","bad":"`+secret+`<ref:ohmlab/y#k><uuid>"}`),
			others: []*ohmlabv1alpha1.VaultSeed{seed("c", "ohmlab/y", `{"k":"<ref:ohmlab/x#k>"}`)},
			want: validate.Verdict{Problems: []validate.Problem{
				{Reason: "InvalidSpec", Key: "bad", Message: "a composed value joins text and <ref:mount/path#key.path> references only: give this template a key of its own in the object and compose <ref:own/path#that.key>, found \"<uuid>\""},
				{Reason: "RefCycle", Key: "url", Message: "reference cycle: ohmlab/x -> ohmlab/y -> ohmlab/x"},
			}},
		},
		{
			name: "update: a composed value's changed text or sources are no warning: it follows them",
			seed: seed("a", "ohmlab/a", `{"url":"pg://<ref:ohmlab/b#u>:<ref:ohmlab/b#p>@db2"}`),
			old:  seed("a", "ohmlab/a", `{"url":"pg://<ref:ohmlab/b#u>@db"}`),
		},
		{
			name: "update: a changed template rotated by a new token is no warning",
			seed: withRotate(seed("a", "ohmlab/a", `{"r":"<random:32>","s":"<hex:8>"}`), "2", "r"),
			old:  withRotate(seed("a", "ohmlab/a", `{"r":"<random:24>","s":"<hex:4>"}`), "1", "r"),
			want: validate.Verdict{Warnings: []validate.Problem{
				{Key: "s", Message: "now declared as <hex:8>, but the controller seeds once and keeps the value already on the path: list the key in rotate.keys and change rotate.token to regenerate it"},
			}},
		},
		{
			name: "update: the same token rotates nothing",
			seed: withRotate(seed("a", "ohmlab/a", `{"r":"<random:32>"}`), "1"),
			old:  withRotate(seed("a", "ohmlab/a", `{"r":"<random:24>"}`), "1"),
			want: validate.Verdict{Warnings: []validate.Problem{
				{Key: "r", Message: "now declared as <random:32>, but the controller seeds once and keeps the value already on the path: list the key in rotate.keys and change rotate.token to regenerate it"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validate.Seed(seeds.Analyse(tt.seed), analysedOrNil(tt.old), analyseAll(tt.others))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
			noSecret(t, got)
			if tt.old == nil {
				all := validate.Set(analyseAll(append([]*ohmlabv1alpha1.VaultSeed{tt.seed}, tt.others...)))
				if diff := cmp.Diff(all[0], got); diff != "" {
					t.Errorf("Seed differs from Set on the object (-set +seed):\n%s", diff)
				}
			}
		})
	}
}

// TestWarningsOfAdmittedMistakes: a path copied from `vault kv get`'s
// "Secret Path" (with data/ after the mount) and a rotate block without
// keys on an object with key pairs are admitted, with a warning that says
// what happens and what to write.
func TestWarningsOfAdmittedMistakes(t *testing.T) {
	apiPath := func(path, api, label, fixed string) string {
		return "has " + api + `/ after the mount, as KV v2's API path does (vault kv prints it as "` + label + `"), but a VaultSeed's path is <mount>/<path> without it: ` +
			"the controller adds data/ itself and would use " + path + ", which its policy usually does not cover (permission denied). " +
			"Write " + fixed + ", unless the secret's own path does begin with " + api + "/"
	}
	rotateAll := func(privates string) string {
		return "rotate has no keys, so a new token regenerates every generated key, the private keys " + privates +
			" included, and their public keys with them: what was encrypted to the old age key, or trusts the old SSH key, stops working. " +
			"List the keys to regenerate in rotate.keys (a private key only when its pair must change)"
	}
	tests := []struct {
		name string
		seed *ohmlabv1alpha1.VaultSeed
		want []validate.Problem
	}{
		{
			name: "spec.path with data/ after the mount",
			seed: seed("a", "ohmlab/data/platforms/prod/core/app", `{"k":"<random:8>"}`),
			want: []validate.Problem{{Key: "spec.path", Message: "ohmlab/data/platforms/prod/core/app " +
				apiPath("ohmlab/data/data/platforms/prod/core/app", "data", "Secret Path", "ohmlab/platforms/prod/core/app")}},
		},
		{
			name: "spec.path with metadata/ after the mount",
			seed: seed("a", "ohmlab/metadata/platforms/app", `{"k":"<random:8>"}`),
			want: []validate.Problem{{Key: "spec.path", Message: "ohmlab/metadata/platforms/app " +
				apiPath("ohmlab/data/metadata/platforms/app", "metadata", "Metadata Path", "ohmlab/platforms/app")}},
		},
		{
			name: "a reference's path with data/ after the mount",
			seed: seed("a", "ohmlab/platforms/app", `{"db":{"pw":"<ref:ohmlab/data/platforms/pg#pw>"}}`),
			want: []validate.Problem{{Key: "db.pw", Message: "<ref:ohmlab/data/platforms/pg#pw> reads ohmlab/data/platforms/pg, which " +
				apiPath("ohmlab/data/data/platforms/pg", "data", "Secret Path", "ohmlab/platforms/pg")}},
		},
		{
			name: "each reference of a composed value whose path has data/ after the mount",
			seed: seed("a", "ohmlab/platforms/app", `{"url":"pg://<ref:ohmlab/data/platforms/pg#user>:<ref:ohmlab/platforms/pg#pw>@db"}`),
			want: []validate.Problem{{Key: "url", Message: "<ref:ohmlab/data/platforms/pg#user> reads ohmlab/data/platforms/pg, which " +
				apiPath("ohmlab/data/data/platforms/pg", "data", "Secret Path", "ohmlab/platforms/pg")}},
		},
		{
			name: "a secret named data at the top of the mount, or data deeper, is no warning",
			seed: seed("a", "ohmlab/platforms/data", `{"k":"<ref:ohmlab/data#k>","l":"<ref:ohmlab/x/data/y#k>"}`),
		},
		{
			name: "rotate without keys on an object with both key pairs: they are named",
			seed: withRotate(seed("a", "ohmlab/a", `{"pw":"<random:8>","sops":{"secret":"<age:secret>","public":"<age:public>"},"deploy":{"key":"<ssh:private>","pub":"<ssh:public>"}}`), "1"),
			want: []validate.Problem{{Key: "spec.rotate", Message: rotateAll("deploy.key (<ssh:private>), sops.secret (<age:secret>)")}},
		},
		{
			name: "rotate with keys on an object with a key pair is no warning",
			seed: withRotate(seed("a", "ohmlab/a", `{"pw":"<random:8>","sops":{"secret":"<age:secret>","public":"<age:public>"}}`), "1", "pw"),
		},
		{
			name: "rotate without keys on an object without a key pair is no warning",
			seed: withRotate(seed("a", "ohmlab/a", `{"pw":"<random:8>","h":"<bcrypt:pw>"}`), "1"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validate.Seed(seeds.Analyse(tt.seed), nil, nil)
			if !got.Valid() {
				t.Fatalf("refused: %s", got.Message())
			}
			if diff := cmp.Diff(tt.want, got.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVerdictMessage(t *testing.T) {
	v := validate.Verdict{Problems: []validate.Problem{
		{Reason: "InvalidSpec", Key: "a", Message: "first"},
		{Reason: "InvalidSpec", Key: "b", Message: "second"},
	}}
	if got, want := v.Message(), "a: first; b: second"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
}

func analyseAll(objs []*ohmlabv1alpha1.VaultSeed) []seeds.Analysed {
	out := make([]seeds.Analysed, len(objs))
	for i, o := range objs {
		out[i] = seeds.Analyse(o)
	}
	return out
}

func analysedOrNil(o *ohmlabv1alpha1.VaultSeed) *seeds.Analysed {
	if o == nil {
		return nil
	}
	a := seeds.Analyse(o)
	return &a
}
