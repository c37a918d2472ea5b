// Package v1alpha1 holds the ohmlab.fr/v1alpha1 API: the VaultSeed kind, its
// condition types and its reasons.
//
// +kubebuilder:object:generate=true
// +groupName=ohmlab.fr
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "ohmlab.fr", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package into a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
