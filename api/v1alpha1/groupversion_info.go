// Package v1alpha1 holds the ohmlab.fr/v1alpha1 API: the VaultSeed kind, its
// condition types and its reasons.
//
// +kubebuilder:object:generate=true
// +groupName=ohmlab.fr
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "ohmlab.fr", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package into a scheme.
	// It is apimachinery's, not controller-runtime's: the CLI decodes these
	// kinds without the controller's runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &VaultSeed{}, &VaultSeedList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
