package vaultseed

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
	"github.com/ohmlab/ohmlab-controller/planner"
)

// andMore is how a capped message ends: the count of the items left out.
var andMore = regexp.MustCompile(`… and (\d+) more$`)

// warnings returns the notes of the Warning events with reason regarding
// one object, as the API server stores them.
func (f *fixture) warnings(name, reason string) []string {
	f.t.Helper()
	var list eventsv1.EventList
	NewWithT(f.t).Expect(cp.Client.List(context.Background(), &list, client.InNamespace(f.ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Type == "Warning" && e.Reason == reason {
			out = append(out, e.Note)
		}
	}
	return out
}

// TestManyPendingReferencesAreReportedCapped: 400 pending references make a
// RefPending message longer than a condition may be (32768 characters) and
// than an event's note (1024 bytes). The object still gets its status, its
// message capped between two references and ending with how many it leaves
// out, and its Warning event is stored by the API server.
func TestManyPendingReferencesAreReportedCapped(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	const refs = 400
	data := map[string]string{}
	var sources []string
	for i := range refs {
		src := f.path(fmt.Sprintf("a-source-with-a-name-long-as-real-ones-are-%03d", i))
		sources = append(sources, src)
		data[fmt.Sprintf("k%03d", i)] = "<ref:" + src + "#password>"
	}
	raw, err := json.Marshal(data)
	g.Expect(err).NotTo(HaveOccurred())
	f.create(f.seed("app", f.path("app"), string(raw)))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonRefPending, 30*time.Second)
	first := "waiting for " + sources[0] + "#password (path missing), "
	for typ, status := range map[string]metav1.ConditionStatus{ohmlabv1alpha1.ConditionReady: metav1.ConditionFalse, ohmlabv1alpha1.ConditionReconciling: metav1.ConditionTrue} {
		c := condition(obj, typ)
		g.Expect(c).NotTo(BeNil(), typ)
		g.Expect(c.Status).To(Equal(status), typ)
		g.Expect(len(c.Message)).To(BeNumerically("<=", planner.MaxConditionMessage), typ)
		g.Expect(c.Message).To(HavePrefix(first), typ)
		g.Expect(c.Message).To(MatchRegexp(andMore.String()), typ)
		shown := strings.Count(c.Message, "#password (path missing)")
		left, _ := strconv.Atoi(andMore.FindStringSubmatch(c.Message)[1])
		g.Expect(shown+left).To(Equal(refs), "%s lists %d references and says %d more", typ, shown, left)
		t.Logf("%s: %d bytes, %d references listed, ending %q", typ, len(c.Message), shown, c.Message[len(c.Message)-40:])
	}

	var notes []string
	g.Eventually(func() []string {
		notes = f.warnings("app", ohmlabv1alpha1.ReasonRefPending)
		return notes
	}).WithTimeout(10*time.Second).Should(HaveLen(1), "the Warning event is stored")
	g.Expect(len(notes[0])).To(BeNumerically("<=", planner.MaxEventNote))
	g.Expect(notes[0]).To(HavePrefix(first))
	g.Expect(notes[0]).To(MatchRegexp(andMore.String()))
	t.Logf("the event's note: %d bytes, ending %q", len(notes[0]), notes[0][len(notes[0])-40:])
	g.Expect(pathMissing(t, f.path("app"))).To(BeTrue(), "a RefPending object writes nothing")
}

// TestManyStalledHashesAreReportedCapped: ten hashes of placeholders not
// filled in stall with a message over an event's 1024 bytes; the Warning
// event is stored by the API server, capped between two stalled keys, and
// the condition lists all ten.
func TestManyStalledHashesAreReportedCapped(t *testing.T) {
	g := NewWithT(t)
	f := startController(t, controllerOptions{})
	const hashes = 10
	data := map[string]string{}
	for i := range hashes {
		data[fmt.Sprintf("password%d", i)] = ""
		data[fmt.Sprintf("password%dHashed", i)] = fmt.Sprintf("<bcrypt:password%d>", i)
	}
	raw, err := json.Marshal(data)
	g.Expect(err).NotTo(HaveOccurred())
	path := f.path("app")
	f.create(f.seed("app", path, string(raw)))

	obj := f.waitReason("app", ohmlabv1alpha1.ReasonInvalidSpec, 20*time.Second)
	stalled := condition(obj, ohmlabv1alpha1.ConditionStalled)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(strings.Count(stalled.Message, "cannot be computed while")).To(Equal(hashes), "the condition has room for every stalled key")
	g.Expect(len(stalled.Message)).To(BeNumerically(">", planner.MaxEventNote), "longer than an event's note")

	var notes []string
	g.Eventually(func() []string {
		notes = f.warnings("app", ohmlabv1alpha1.ReasonInvalidSpec)
		return notes
	}).WithTimeout(10*time.Second).Should(HaveLen(1), "the Warning event is stored")
	note := notes[0]
	g.Expect(len(note)).To(BeNumerically("<=", planner.MaxEventNote))
	g.Expect(note).To(HavePrefix("password0Hashed: cannot be computed while password0 is empty; fill it in (vault kv patch " + path + " password0=...); "))
	g.Expect(note).To(MatchRegexp(andMore.String()))
	shown := strings.Count(note, "cannot be computed while")
	left, _ := strconv.Atoi(andMore.FindStringSubmatch(note)[1])
	g.Expect(shown+left).To(Equal(hashes), "the note lists %d keys and says %d more", shown, left)
	t.Logf("Stalled: %d bytes; the event's note: %d bytes, %d keys listed, ending %q", len(stalled.Message), len(note), shown, note[len(note)-40:])
}
