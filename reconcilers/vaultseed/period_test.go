package vaultseed

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"

	ohmlabv1alpha1 "github.com/ohmlab/ohmlab-controller/api/v1alpha1"
)

// TestRotationPeriodOnTheRealServers: an object with rotate.every: 1h on
// the real kube-apiserver and Vault, the controller's clock moved by the
// test (never a wait on the wall clock: each step is a reconcile asked for
// and waited for). Created, the path records the start of the period; a
// reconcile before the period ends writes nothing; once the clock has
// passed it, the listed key rotates once (a new KV version, the time
// recorded, a Rotated event naming the key, the rotation metric at that
// time); the next reconcile writes nothing more. A new token then rotates
// at once, before the period ends, and starts it again.
func TestRotationPeriodOnTheRealServers(t *testing.T) {
	g := NewWithT(t)
	start := time.Now().UTC().Truncate(time.Second)
	var offset atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(offset.Load())) }
	f := startController(t, controllerOptions{clock: clock})
	path := f.path("app")
	obj := f.seed("app", path, `{"user": "admin", "password": "<random:16>", "other": "<random:16>"}`)
	obj.Spec.Rotate = &ohmlabv1alpha1.Rotation{Every: "1h", Keys: []string{"password"}}
	f.create(obj)
	f.waitReady("app")
	created := readPath(t, path)
	g.Expect(created.Version).To(Equal(1))
	g.Expect(created.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotatedAtMetadataKey, start.Format(time.RFC3339)), "the period starts with the values")
	g.Expect(created.Metadata).NotTo(HaveKey(ohmlabv1alpha1.RotationTokenMetadataKey))
	rotation := func() float64 {
		v, ok := f.gaugeValue("ohmlab_last_rotation_timestamp_seconds", map[string]string{"namespace": f.ns, "name": "app", "target": "vault"})
		g.Expect(ok).To(BeTrue(), "no ohmlab_last_rotation_timestamp_seconds series")
		return v
	}
	g.Expect(rotation()).To(Equal(float64(start.Unix())))

	step := func(value string, at time.Duration) kvPath {
		t.Helper()
		offset.Store(int64(at))
		f.requestReconcile("app", value)
		f.waitHandled("app", value)
		return readPath(t, path)
	}
	g.Expect(step("before", 59*time.Minute).Version).To(Equal(1), "before the period ends, nothing is written")

	rotated := step("crossed", time.Hour+time.Minute)
	at := start.Add(time.Hour + time.Minute)
	g.Expect(rotated.Version).To(Equal(2), "one rotation")
	g.Expect(rotated.Data["password"]).NotTo(Equal(created.Data["password"]), "the listed key is regenerated")
	g.Expect(rotated.Data["other"]).To(Equal(created.Data["other"]), "a key not listed is not")
	g.Expect(rotated.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotatedAtMetadataKey, at.Format(time.RFC3339)))
	g.Eventually(func() []string { return f.events("app") }).Should(ContainElement(
		"Normal Rotated: 1 rotate (password) (KV version 2)"))
	g.Expect(rotation()).To(Equal(float64(at.Unix())))

	before := f.kv.Counts()
	g.Expect(step("again", time.Hour+2*time.Minute).Version).To(Equal(2), "once per period")
	g.Expect(f.kv.Counts()).To(Equal(map[string]int{"read": before["read"] + 1, "write": before["write"], "mark": before["mark"]}),
		"a reconcile within the period reads the path once, as without one")

	// The clock moves first: the edit itself is reconciled at once.
	offset.Store(int64(time.Hour + 3*time.Minute))
	f.update("app", func(o *ohmlabv1alpha1.VaultSeed) { o.Spec.Rotate.Token = "t1" })
	byToken := step("token", time.Hour+3*time.Minute)
	g.Expect(byToken.Version).To(Equal(3), "a new token rotates at once, within the period")
	g.Expect(byToken.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotationTokenMetadataKey, "t1"))
	g.Expect(byToken.Metadata).To(HaveKeyWithValue(ohmlabv1alpha1.RotatedAtMetadataKey, start.Add(time.Hour+3*time.Minute).Format(time.RFC3339)),
		"and starts the period again")
	g.Expect(step("after-token", 2*time.Hour+2*time.Minute).Version).To(Equal(3), "the period counts from the token's rotation")
	g.Expect(step("period-after-token", 2*time.Hour+3*time.Minute).Version).To(Equal(4))
	g.Eventually(func() int { return f.emissions("app", "Normal", "Rotated") }).Should(Equal(3))
}

// TestLastRotationSeries: the rotation time of an object is one gauge
// series with the object's target, namespace and name, after the write
// series in the exposition, and goes with the object.
func TestLastRotationSeries(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	m.setReady("vault", "team-a", "a", ohmlabv1alpha1.ReasonReconciled, true)
	m.rotatedAt("vault", "team-a", "a", time.Unix(1764633600, 0))
	want := `# HELP ohmlab_last_rotation_timestamp_seconds ` + lastRotationFamily.help + `
# TYPE ohmlab_last_rotation_timestamp_seconds gauge
ohmlab_last_rotation_timestamp_seconds{name="a",namespace="team-a",target="vault"} 1.7646336e+09
`
	if got := exposition(t, m); !strings.HasPrefix(got, want) {
		t.Errorf("exposition:\n%s\nwant it to begin with:\n%s", got, want)
	}
	m.forget("vault", "team-a", "a")
	if got := exposition(t, m); got != "" {
		t.Errorf("after forget: %s", got)
	}
}
