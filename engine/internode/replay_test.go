package internode

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signedRequest is a request as a version-4 peer sends it.
func signedRequest(t *testing.T, n *testNode, op string, q url.Values, body []byte) *http.Request {
	t.Helper()
	u := "http://" + n.addr + Prefix + op
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sign(req, Secret("pw"), Protocol, bodySum(body))
	return req
}

// replay sends a copy of req (same headers) with the given query and body.
func replay(t *testing.T, req *http.Request, rawQuery string, body []byte) (int, string) {
	t.Helper()
	u := *req.URL
	u.RawQuery = rawQuery
	again, err := http.NewRequestWithContext(t.Context(), req.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	again.Header = req.Header.Clone()
	resp, err := http.DefaultClient.Do(again)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(msg))
}

// TestSignedRequestsCannotBeReplayedOrAltered: a request an eavesdropper
// saw is refused when sent again as it was, with another query (another
// drive or bucket), or with another body; one made up from a legacy
// signature while declaring the current protocol is refused; a legacy one
// from a node that declares an older protocol still works (rolling
// upgrades).
func TestSignedRequestsCannotBeReplayedOrAltered(t *testing.T) {
	n := startNode(t, "127.0.0.1:0", Protocol, newDrives(t, "d1", "d2"))
	var roots []string
	for r := range n.drives {
		roots = append(roots, r)
	}
	body := []byte(`{"Bucket":"bk"}`)
	q := url.Values{"drive": {roots[0]}}
	req := signedRequest(t, n, opStatBucket.name, q, body)

	if code, msg := replay(t, req, q.Encode(), body); code != http.StatusOK {
		t.Fatalf("first use: %d %s", code, msg)
	}
	for name, c := range map[string]struct {
		query string
		body  []byte
	}{
		"as sent":          {q.Encode(), body},
		"another drive":    {url.Values{"drive": {roots[1]}}.Encode(), body},
		"another body":     {q.Encode(), []byte(`{"Bucket":"other"}`)},
		"query and body":   {url.Values{"drive": {roots[1]}}.Encode(), []byte(`{"Bucket":"other"}`)},
		"an added arg":     {q.Encode() + "&force=true", body},
		"the body dropped": {q.Encode(), nil},
	} {
		if code, msg := replay(t, req, c.query, c.body); code != http.StatusUnauthorized {
			t.Errorf("replayed %s: %d %s", name, code, msg)
		}
	}

	// A fresh request with a body other than the one it was signed with.
	fresh := signedRequest(t, n, opStatBucket.name, q, body)
	if code, msg := replay(t, fresh, q.Encode(), []byte(`{"Bucket":"bk2"}`)); code != http.StatusUnauthorized || !strings.Contains(msg, "body") {
		t.Errorf("altered body: %d %s", code, msg)
	}

	// A fresh request sent to another drive than the one it was signed for.
	other := signedRequest(t, n, opStatBucket.name, q, body)
	if code, msg := replay(t, other, url.Values{"drive": {roots[1]}}.Encode(), body); code != http.StatusUnauthorized || !strings.Contains(msg, "signature") {
		t.Errorf("altered query: %d %s", code, msg)
	}

	// Legacy signatures: refused when the sender claims this protocol,
	// served when it declares an older one.
	legacy := func(version int) int {
		r, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+n.addr+Prefix+opStatBucket.name+"?"+q.Encode(), bytes.NewReader(body))
		sign(r, Secret("pw"), framesProtocol, "")
		r.Header.Set(hdrProtocol, strconv.Itoa(version))
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := legacy(Protocol); code != http.StatusUnauthorized {
		t.Errorf("legacy signature declaring protocol %d: %d", Protocol, code)
	}
	if code := legacy(framesProtocol); code != http.StatusOK {
		t.Errorf("legacy signature from a protocol %d node: %d", framesProtocol, code)
	}
}

// TestNonceCache: a nonce is accepted once inside its window, and
// forgotten after it.
func TestNonceCache(t *testing.T) {
	var c nonces
	a, b := [16]byte{1}, [16]byte{2}
	if !c.first(a, time.Now().Add(time.Minute)) || c.first(a, time.Now().Add(time.Minute)) || !c.first(b, time.Now().Add(-time.Second)) {
		t.Fatal("first use accepted, second refused, another accepted")
	}
	c.lastSweep = time.Time{} // the next insert sweeps
	_ = c.first([16]byte{3}, time.Now().Add(time.Minute))
	if _, kept := c.until[b]; kept || len(c.until) != 2 {
		t.Fatalf("after a sweep: %d nonces kept (an expired one: %v)", len(c.until), kept)
	}
}
