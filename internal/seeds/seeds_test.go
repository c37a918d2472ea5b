package seeds_test

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/internal/seeds"
)

func seed(name, path, data string) *ohmlabv1alpha1.VaultSeed {
	return &ohmlabv1alpha1.VaultSeed{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vo", Name: name},
		Spec:       ohmlabv1alpha1.VaultSeedSpec{Path: path, Data: &apiextensionsv1.JSON{Raw: []byte(data)}},
	}
}

func TestAnalyseReportsUndecodableData(t *testing.T) {
	s := seed("b", "ohmlab/b", `["x"]`)
	if _, err := seeds.Object(s); err == nil || !strings.Contains(err.Error(), "vo/b") {
		t.Fatalf("Object: %v, want an error naming vo/b", err)
	}
	a := seeds.Analyse(s).Analysis
	if len(a.Problems) != 1 || a.Problems[0].Message != "spec.data is not an object" {
		t.Fatalf("problems %v, want spec.data is not an object", a.Problems)
	}
}
