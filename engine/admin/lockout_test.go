package admin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/strata-storage/strata/engine/adminapi"
)

// TestFailedLoginsLockOut: ten wrong passwords from one address refuse it
// (even with the right one) until the window ends; other addresses are
// served; a success clears the count.
func TestFailedLoginsLockOut(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lock := newLockout()
	lock.clock = func() time.Time { return now }
	h := authenticated(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), "root", "secret", true, lock)
	try := func(addr, pass string) int {
		r := httptest.NewRequest(http.MethodGet, adminapi.Prefix+"info", nil)
		r.RemoteAddr = addr
		if err := adminapi.Sign(r, "root", pass, time.Now()); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for i := range 9 {
		if code := try("10.0.0.9:4000", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i+1, code)
		}
	}
	if code := try("10.0.0.9:4001", "secret"); code != http.StatusOK {
		t.Fatalf("right password after 9 failures: %d", code)
	}
	for range 10 {
		try("10.0.0.9:4002", "guess")
	}
	if code := try("10.0.0.9:4003", "secret"); code != http.StatusTooManyRequests {
		t.Fatalf("right password after 10 failures: %d, want 429", code)
	}
	if code := try("10.0.0.10:4000", "secret"); code != http.StatusOK {
		t.Fatalf("another address: %d", code)
	}
	now = now.Add(failureWindow)
	if code := try("10.0.0.9:4004", "secret"); code != http.StatusOK {
		t.Fatalf("after the window: %d", code)
	}
	// The map of addresses stays bounded.
	for i := range maxTracked + 50 {
		lock.failed(time.Duration(i).String() + ":1")
	}
	if len(lock.by) > maxTracked {
		t.Fatalf("%d addresses tracked", len(lock.by))
	}
}
