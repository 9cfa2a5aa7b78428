package webhookcert

import (
	"bytes"
	"crypto/x509"
	"net"
	"testing"
	"time"
)

var (
	t0       = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	day      = 24 * time.Hour
	webhookH = hosts{dnsNames: []string{"strata-webhook.strata-system.svc", "strata-webhook.strata-system.svc.cluster.local"}}
)

// must takes step s at now, failing the test on an error.
func must(t *testing.T, s step, m material, now time.Time, l Lifetimes) material {
	t.Helper()
	m, err := apply(s, m, now, webhookH, l)
	if err != nil {
		t.Fatalf("%s at %v: %v", s, now, err)
	}
	return m
}

func TestNextStep(t *testing.T) {
	l := DefaultLifetimes
	fresh := must(t, stepStart, material{}, t0, l)
	otherCA := must(t, stepStart, material{}, t0, l)
	// Serving certificate renewed late in the CA's life, so the CA's own
	// schedule is what is due at 244 days.
	late := must(t, stepRenew, fresh, t0.Add(240*day), l)
	rotating := must(t, stepAddNext, late, t0.Add(244*day), l)
	switched := must(t, stepSwitch, rotating, t0.Add(244*day+2*time.Hour), l)

	cases := []struct {
		name        string
		m           material
		at          time.Duration // after t0
		nextTrusted bool
		ips         []net.IP // the serving certificate's wanted addresses, besides webhookH's names
		want        step
	}{
		{name: "nothing yet", m: material{}, want: stepStart},
		{name: "fresh", m: fresh, at: time.Minute, want: stepNone},
		{name: "CA expired while nobody ran", m: fresh, at: 366 * day, want: stepStart},
		{name: "serving certificate gone", m: material{ca: fresh.ca}, want: stepReissue},
		{name: "serving certificate from another CA", m: material{ca: fresh.ca, serving: otherCA.serving}, want: stepReissue},
		{name: "serving certificate for other names", m: func() material {
			m := fresh
			var err error
			m.serving, err = newServing(m.ca, hosts{dnsNames: []string{"old-name.strata-system.svc"}}, t0, l.Serving)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}(), want: stepReissue},
		{name: "serving certificate for an added address", m: fresh, ips: []net.IP{net.ParseIP("127.0.0.1")}, want: stepReissue},
		{name: "serving certificate before two thirds", m: fresh, at: 59 * day, want: stepNone},
		{name: "serving certificate at two thirds", m: fresh, at: 60 * day, want: stepRenew},
		{name: "serving certificate expired", m: fresh, at: 91 * day, want: stepReissue},
		{name: "CA before two thirds", m: late, at: 243 * day, want: stepNone},
		{name: "CA at two thirds", m: late, at: 244 * day, want: stepAddNext},
		{name: "next CA not in the caBundle yet, however long", m: rotating, at: 250 * day, want: stepNone},
		{name: "next CA trusted, overlap not over", m: rotating, at: 244*day + 30*time.Minute, nextTrusted: true, want: stepNone},
		{name: "next CA trusted for the overlap", m: rotating, at: 244*day + time.Hour, nextTrusted: true, want: stepSwitch},
		{name: "after the switch, overlap not over", m: switched, at: 244*day + 2*time.Hour + 59*time.Minute, want: stepNone},
		{name: "after the switch, overlap over", m: switched, at: 244*day + 3*time.Hour, want: stepDropPrevious},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hosts{dnsNames: webhookH.dnsNames, ips: c.ips}
			if got := nextStep(c.m, t0.Add(c.at), h, l, c.nextTrusted); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

func TestApplySwitchKeepsTheOldCATrusted(t *testing.T) {
	l := DefaultLifetimes
	m := must(t, stepStart, material{}, t0, l)
	old := m.ca.cert
	m = must(t, stepAddNext, m, t0.Add(244*day), l)
	if got := parseCerts(m.bundle()); len(got) != 2 || !got[0].Equal(old) || !got[1].Equal(m.next.cert) {
		t.Fatalf("bundle during the rotation holds %d CAs, want the CA then the next", len(got))
	}
	next, during := m.next.cert, m.bundle()
	m = must(t, stepSwitch, m, t0.Add(244*day+time.Hour), l)
	if !m.ca.cert.Equal(next) || !m.previous.Equal(old) || m.next != nil {
		t.Fatal("the switch did not make the next CA the CA and keep the old one as previous")
	}
	if err := m.serving.cert.CheckSignatureFrom(next); err != nil {
		t.Fatalf("the new serving certificate is not from the new CA: %v", err)
	}
	if !bytes.Equal(m.bundle(), during) {
		t.Fatal("the switch changed the bundle: it should only change which CA signs")
	}
	m = must(t, stepDropPrevious, m, t0.Add(244*day+2*time.Hour), l)
	if got := parseCerts(m.bundle()); len(got) != 1 || !got[0].Equal(next) {
		t.Fatal("bundle after the overlap is not the new CA alone")
	}
}

func TestServingCertificateNeverOutlivesItsCA(t *testing.T) {
	l := DefaultLifetimes
	m := must(t, stepStart, material{}, t0, l)
	m = must(t, stepRenew, m, t0.Add(330*day), l)
	if !m.serving.cert.NotAfter.Equal(m.ca.cert.NotAfter) {
		t.Fatalf("serving certificate ends %v, its CA %v", m.serving.cert.NotAfter, m.ca.cert.NotAfter)
	}
}

func TestLifetimesValidate(t *testing.T) {
	for _, c := range []struct {
		l  Lifetimes
		ok bool
	}{
		{DefaultLifetimes, true},
		{Lifetimes{CA: 6 * time.Hour, Serving: 5 * time.Hour, Overlap: time.Minute}, true},
		{Lifetimes{CA: 6 * time.Hour, Serving: 5 * time.Hour, Overlap: time.Hour}, false}, // two overlaps do not fit in the CA's last third
		{Lifetimes{CA: 365 * day, Serving: 2 * time.Hour, Overlap: time.Hour}, false},     // renewals would come faster than the overlap
		{Lifetimes{CA: 365 * day, Serving: 90 * day}, false},
	} {
		if err := c.l.validate(); (err == nil) != c.ok {
			t.Errorf("%+v: validate() = %v, want ok=%v", c.l, err, c.ok)
		}
	}
}

// TestRotationWalk runs the keeper's decisions through several CA lifetimes
// against a model of what lags behind the Secret: the API server takes in a
// written caBundle only after apiLag, and a second replica loads a new
// serving certificate only after replicaLag, both shorter than the
// overlap. At every instant, what each replica serves must verify against
// the caBundle the API server is using.
func TestRotationWalk(t *testing.T) {
	l := Lifetimes{CA: 30 * time.Hour, Serving: 9 * time.Hour, Overlap: time.Hour}
	apiLag, replicaLag := 40*time.Minute, 50*time.Minute
	if err := l.validate(); err != nil {
		t.Fatal(err)
	}

	type change[T any] struct {
		at time.Time
		v  T
	}
	// latest is the value of changes in effect at now, after lag.
	latest := func(changes []change[[]byte], now time.Time, lag time.Duration) []byte {
		var v []byte
		for _, c := range changes {
			if !c.at.Add(lag).After(now) {
				v = c.v
			}
		}
		return v
	}

	var (
		m        material
		written  []byte // the configurations' caBundle, as the keeper reads it
		bundles  []change[[]byte]
		servings []change[[]byte] // DER of the Secret's serving certificate
		steps    = map[step]int{}
	)
	for now := t0; now.Before(t0.Add(100 * time.Hour)); now = now.Add(5 * time.Minute) {
		// One keeper's passes at this instant: steps until none is due,
		// then the caBundle.
		for range 10 {
			s := nextStep(m, now, webhookH, l, m.next != nil && bundleHas(written, m.next.cert))
			if s == stepNone {
				break
			}
			steps[s]++
			m = must(t, s, m, now, l)
			servings = append(servings, change[[]byte]{now, m.serving.cert.Raw})
		}
		if want := m.bundle(); !bytes.Equal(want, written) {
			written = want
			bundles = append(bundles, change[[]byte]{now, want})
		}

		pool := x509.NewCertPool()
		for _, c := range parseCerts(latest(bundles, now, apiLag)) {
			pool.AddCert(c)
		}
		for name, lag := range map[string]time.Duration{"the writing replica": 0, "a lagging replica": replicaLag} {
			der := latest(servings, now, lag)
			if der == nil {
				continue // not serving yet: not ready, not called
			}
			cert, err := x509.ParseCertificate(der)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: webhookH.dnsNames[0]}); err != nil &&
				now.After(t0.Add(apiLag+replicaLag)) { // at the very start nothing is trusted yet
				t.Fatalf("at %v (+%v) %s serves a certificate the API server refuses: %v (steps so far %v)", now, now.Sub(t0), name, err, steps)
			}
		}
	}
	if steps[stepSwitch] < 3 || steps[stepDropPrevious] < 3 || steps[stepRenew] == 0 || steps[stepStart] != 1 || steps[stepReissue] != 0 {
		t.Errorf("steps over 100 hours: %v; want one start, renewals, and three or more complete CA rotations", steps)
	}
}
