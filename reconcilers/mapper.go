package reconcilers

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// newRESTMapper is controller-runtime's dynamic REST mapper with its
// answers to RESTMapping for a kind at given versions remembered. The
// manager's cache asks it on every Get and List, to tell namespaced
// kinds apart (a namespace-scoped cache), and each answer walks every API
// group the mapper knows, building an error for each that has no such
// kind: most of a quiet reconcile's allocations. A kind's
// scope at a version does not change while it is served (a CRD's scope is
// immutable), so the first answer stands; errors and questions without a
// version (the preferred one, which an upgrade may move) are not
// remembered.
func newRESTMapper(c *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	m, err := apiutil.NewDynamicRESTMapper(c, httpClient)
	if err != nil {
		return nil, err
	}
	return &rememberingMapper{RESTMapper: m, mappings: map[string]meta.RESTMapping{}}, nil
}

type rememberingMapper struct {
	meta.RESTMapper

	mu       sync.RWMutex
	mappings map[string]meta.RESTMapping // group/kind/versions -> the answer
}

// RESTMapping implements meta.RESTMapper. It returns a copy of the answer,
// so a caller that changes it changes nothing here.
func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 0 {
		return m.RESTMapper.RESTMapping(gk)
	}
	key := gk.Group + "/" + gk.Kind + "/" + strings.Join(versions, ",")
	m.mu.RLock()
	known, ok := m.mappings[key]
	m.mu.RUnlock()
	if ok {
		return &known, nil
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.mappings[key] = *mapping
	m.mu.Unlock()
	out := *mapping
	return &out, nil
}
