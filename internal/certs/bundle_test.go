package certs

import (
	"crypto/rand"
	"net"
	"strings"
	"testing"
	"time"
)

func TestBundleKeepsEachCAOnceInOrderAndFindsSigners(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, _ := NewCA("a", now, rand.Reader)
	b, _ := NewCA("b", now, rand.Reader)
	pemData := append(append(append([]byte{}, a.Cert...), a.Key...), b.Cert...)
	pemData = append(pemData, a.Cert...)
	bundle := ParseBundle(pemData)
	if len(bundle) != 2 || bundle[0].Subject.CommonName != "a" || bundle[1].Subject.CommonName != "b" {
		t.Fatalf("bundle %v", bundle)
	}
	if again := ParseBundle(bundle.PEM()); len(again) != 2 || !again[0].Equal(bundle[0]) {
		t.Fatal("PEM does not round-trip")
	}
	leaf, _ := Issue(b, []string{"x"}, nil, now, rand.Reader)
	c, _ := Leaf(leaf.Cert)
	if s := bundle.Signer(c); s == nil || s.Subject.CommonName != "b" {
		t.Fatalf("signer %v", s)
	}
	if (Bundle{bundle[0]}).Signer(c) != nil {
		t.Fatal("a did not sign it")
	}
	if Fingerprint(c) == Fingerprint(bundle[0]) || len(Fingerprint(c)) != 64 {
		t.Fatal("fingerprint")
	}
}

func TestCheckNamesEveryProblem(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, _ := NewCA("ca", now, rand.Reader)
	other, _ := NewCA("other", now, rand.Reader)
	names := []string{"*.media-hl.store.svc.cluster.local", "media.store.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	good, _ := Issue(ca, names, ips, now, rand.Reader)
	if err := Check(good, ParseBundle(ca.Cert), names, ips, now); err != nil {
		t.Fatalf("a good certificate: %v", err)
	}
	cases := map[string]struct {
		pair Pair
		cas  []byte
		at   time.Time
		want []string
	}{
		"narrow":      {mustIssue(t, ca, names[1:], nil, now), ca.Cert, now, []string{"does not cover *.media-hl.store.svc.cluster.local, 127.0.0.1"}},
		"expired":     {good, ca.Cert, now.Add(ServingLifetime + time.Hour), []string{"it expired at"}},
		"not yet":     {good, ca.Cert, now.Add(-2 * time.Hour), []string{"not valid before"}},
		"foreign CA":  {good, other.Cert, now, []string{"does not chain to ca.crt"}},
		"no ca.crt":   {good, nil, now, []string{"does not chain to the system roots"}},
		"wrong key":   {Pair{Cert: good.Cert, Key: other.Key}, ca.Cert, now, []string{"do not form a key pair"}},
		"all at once": {mustIssue(t, ca, names[1:], nil, now), other.Cert, now.Add(ServingLifetime + time.Hour), []string{"expired", "does not cover", "does not chain"}},
	}
	for name, tc := range cases {
		err := Check(tc.pair, ParseBundle(tc.cas), names, ips, tc.at)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
	}
}

func mustIssue(t *testing.T, ca Pair, names []string, ips []net.IP, now time.Time) Pair {
	t.Helper()
	p, err := Issue(ca, names, ips, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
