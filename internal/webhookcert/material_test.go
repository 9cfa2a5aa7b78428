package webhookcert

import (
	"crypto/x509"
	"net"
	"testing"
)

func TestMaterialRoundTrip(t *testing.T) {
	l := DefaultLifetimes
	m := must(t, stepStart, material{}, t0, l)
	m = must(t, stepAddNext, m, t0.Add(244*day), l)
	m = must(t, stepSwitch, m, t0.Add(245*day), l)
	m = must(t, stepAddNext, m, t0.Add(246*day), l) // not a real sequence: every key present at once

	got := parseMaterial(m.data())
	for name, pair := range map[string][2]*x509.Certificate{
		"ca":       {m.ca.cert, got.caCert()},
		"serving":  {m.serving.cert, got.serving.cert},
		"next":     {m.next.cert, got.nextCert()},
		"previous": {m.previous, got.previous},
	} {
		if pair[1] == nil || !pair[0].Equal(pair[1]) {
			t.Errorf("%s did not survive the Secret", name)
		}
	}
	if len(m.data()) != 7 {
		t.Errorf("%d keys, want 7", len(m.data()))
	}
}

func TestParseMaterialDropsWhatIsBroken(t *testing.T) {
	m := must(t, stepStart, material{}, t0, DefaultLifetimes)
	other := must(t, stepStart, material{}, t0, DefaultLifetimes)
	data := m.data()
	data[keyServingKey] = other.serving.keyPEM // a key that is not the certificate's
	data[keyCACert] = []byte("not PEM")
	got := parseMaterial(data)
	if got.serving != nil || got.ca != nil {
		t.Fatalf("kept a mismatched key pair (%v) or an unparsable CA (%v)", got.serving != nil, got.ca != nil)
	}
	if parseMaterial(nil).ca != nil {
		t.Fatal("an empty Secret has a CA")
	}
}

func TestServingCertificateVerifiesForItsNames(t *testing.T) {
	h := hosts{dnsNames: webhookH.dnsNames, ips: []net.IP{net.ParseIP("127.0.0.1")}}
	ca, err := newCA(t0, DefaultLifetimes.CA)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := newServing(ca, h, t0, DefaultLifetimes.Serving)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	for _, name := range []string{"strata-webhook.strata-system.svc", "strata-webhook.strata-system.svc.cluster.local", "127.0.0.1"} {
		if _, err := serving.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: t0}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := serving.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.strata-system.svc", CurrentTime: t0}); err == nil {
		t.Error("verified for a name it does not carry")
	}
	if !h.matches(serving.cert) || webhookH.matches(serving.cert) {
		t.Error("matches does not compare the addresses")
	}
	if _, err := newServing(ca, hosts{}, t0, DefaultLifetimes.Serving); err == nil {
		t.Error("issued a certificate for no name")
	}
}
