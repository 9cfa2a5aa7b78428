package certs

import (
	"crypto/rand"
	"testing"
	"time"
)

func TestIssueAndRenew(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, err := NewCA("test CA", now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidCA(ca, now) || ValidCA(Pair{Cert: ca.Cert, Key: []byte("junk")}, now) {
		t.Fatal("ValidCA")
	}
	names := []string{"media", "*.media-hl.store.svc"}
	s, err := Issue(ca, names, nil, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !Valid(s, ca, names, nil, now) {
		t.Fatal("a fresh certificate is not valid")
	}
	if Valid(s, ca, []string{"media"}, nil, now) {
		t.Fatal("valid for other names")
	}
	other, _ := NewCA("other", now, rand.Reader)
	if Valid(s, other, names, nil, now) {
		t.Fatal("valid under another CA")
	}
	renew, err := RenewAt(s.Cert)
	if err != nil {
		t.Fatal(err)
	}
	if !renew.After(now.Add(50*24*time.Hour)) || !renew.Before(now.Add(70*24*time.Hour)) {
		t.Fatalf("renew at %v", renew)
	}
	if Valid(s, ca, names, nil, renew.Add(time.Minute)) {
		t.Fatal("still valid after its renewal time")
	}
}
