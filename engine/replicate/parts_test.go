package replicate

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-storage/strata/engine/notifytargets"
	"github.com/strata-storage/strata/engine/objlayer"
)

// TestCopyInPartsCompletionAnswers: how a copy in parts reads what S3
// may answer a completion with (200 at once, then the result or an
// error): an error inside a 200 is retried and aborts the upload; an
// answer cut off is retried and leaves the upload (the destination may
// still be completing it); the result is success. S3's own servers do not
// answer so on demand: an HTTP server plays the destination's part.
func TestCopyInPartsCompletionAnswers(t *testing.T) {
	for _, c := range []struct {
		name       string
		complete   func(w http.ResponseWriter)
		wantErr    bool
		wantAbort  bool
		wantRetry  bool
		wantStatus int
	}{
		{"the result", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, `<?xml version="1.0"?><CompleteMultipartUploadResult><ETag>"x-2"</ETag></CompleteMultipartUploadResult>`)
		}, false, false, false, 0},
		{"an error inside a 200", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "  \n<Error><Code>InternalError</Code><Message>try again</Message></Error>")
		}, true, true, true, http.StatusInternalServerError},
		{"an answer cut off", func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "   ")
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
		}, true, false, true, 0},
		{"200 without a result", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, "   ")
		}, true, false, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var parts []string
			aborted := false
			dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				q := r.URL.Query()
				switch {
				case r.Method == http.MethodPost && q.Has("uploads"):
					_, _ = io.WriteString(w, `<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
				case r.Method == http.MethodPut && q.Get("uploadId") == "u1":
					b, _ := io.ReadAll(r.Body)
					parts = append(parts, q.Get("partNumber")+":"+r.Header.Get("Content-Md5"))
					w.Header().Set("ETag", `"`+md5Hex(b)+`"`)
				case r.Method == http.MethodPost && q.Get("uploadId") == "u1":
					c.complete(w)
				case r.Method == http.MethodDelete && q.Get("uploadId") == "u1":
					aborted = true
					w.WriteHeader(http.StatusNoContent)
				default:
					http.Error(w, "unexpected", http.StatusBadRequest)
				}
			}))
			defer dst.Close()
			r, err := Open(notifytargets.Target{ID: "dr", Type: "s3", Endpoint: dst.URL, Username: "k", Password: "s"}, "us-east-1", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			first, second := bytes.Repeat([]byte{'a'}, objlayer.MinPartSize), []byte("tail")
			v := &Version{Size: int64(len(first) + len(second)), Parts: []int64{int64(len(first)), int64(len(second))},
				PartMD5s: []string{md5Hex(first), md5Hex(second)}, Body: io.NopCloser(io.MultiReader(bytes.NewReader(first), bytes.NewReader(second)))}
			err = r.copyInParts(context.Background(), "dst", "key", v, http.Header{HeaderVersionID: {"v1"}, "Content-Type": {"text/plain"}})
			mu.Lock()
			defer mu.Unlock()
			if (err != nil) != c.wantErr || aborted != c.wantAbort || err != nil && retryable(err) != c.wantRetry {
				t.Fatalf("error %v (retryable %v), aborted %v; want error %v, retryable %v, aborted %v", err, err != nil && retryable(err), aborted,
					c.wantErr, c.wantRetry, c.wantAbort)
			}
			var re *RemoteError
			if c.wantStatus != 0 && (!errors.As(err, &re) || re.Status != c.wantStatus || re.Code != "InternalError") {
				t.Fatalf("error %#v, want status %d and its code", err, c.wantStatus)
			}
			if len(parts) != 2 || !strings.HasPrefix(parts[0], "1:") || strings.HasSuffix(parts[0], ":") || !strings.HasPrefix(parts[1], "2:") {
				t.Fatalf("parts sent: %q, want two with their Content-MD5", parts)
			}
		})
	}
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

// A part whose upload fails with an error worth retrying is sent again
// from the version read anew at its offset, and the copy completes with
// every part's bytes; without a way to read it again, the copy fails as
// before (and is retried whole).
func TestCopyInPartsSendsAPartAgain(t *testing.T) {
	first, second, third := bytes.Repeat([]byte{'a'}, objlayer.MinPartSize), bytes.Repeat([]byte{'b'}, objlayer.MinPartSize), []byte("tail")
	whole := slices.Concat(first, second, third)
	for _, c := range []struct {
		name    string
		reopen  bool
		early   bool // the failed attempt is answered before its body is read
		wantErr bool
	}{
		{"answered after the body", true, false, false},
		{"answered before the body", true, true, false},
		{"no way to read it again", false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var sent []string
			got := map[string][]byte{}
			failed, aborted, completed := false, false, ""
			dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				q := r.URL.Query()
				if r.Method == http.MethodPut && q.Get("partNumber") == "2" {
					mu.Lock()
					fail := !failed
					failed = true
					mu.Unlock()
					if fail {
						if !c.early {
							_, _ = io.ReadAll(r.Body)
						}
						w.Header().Set("Connection", "close")
						http.Error(w, "<Error><Code>InternalError</Code></Error>", http.StatusInternalServerError)
						return
					}
				}
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case r.Method == http.MethodPost && q.Has("uploads"):
					_, _ = io.WriteString(w, `<InitiateMultipartUploadResult><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
				case r.Method == http.MethodPut:
					sent = append(sent, q.Get("partNumber"))
					if md5Hex(b) != hex.EncodeToString(mustB64(t, r.Header.Get("Content-Md5"))) {
						http.Error(w, "<Error><Code>BadDigest</Code></Error>", http.StatusBadRequest)
						return
					}
					got[q.Get("partNumber")] = b
					w.Header().Set("ETag", `"`+md5Hex(b)+`"`)
				case r.Method == http.MethodPost:
					completed = string(b)
					_, _ = io.WriteString(w, `<CompleteMultipartUploadResult><ETag>"x-3"</ETag></CompleteMultipartUploadResult>`)
				case r.Method == http.MethodDelete:
					aborted = true
					w.WriteHeader(http.StatusNoContent)
				}
			}))
			defer dst.Close()
			r, err := Open(notifytargets.Target{ID: "dr", Type: "s3", Endpoint: dst.URL, Username: "k", Password: "s"}, "us-east-1", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			v := &Version{Size: int64(len(whole)), Parts: []int64{int64(len(first)), int64(len(second)), int64(len(third))},
				PartMD5s: []string{md5Hex(first), md5Hex(second), md5Hex(third)}, Body: io.NopCloser(bytes.NewReader(whole))}
			reopened := 0
			if c.reopen {
				v.Reopen = func(_ context.Context, offset, length int64) (io.ReadCloser, error) {
					reopened++
					return io.NopCloser(bytes.NewReader(whole[offset : offset+length])), nil
				}
			}
			err = r.copyInParts(context.Background(), "dst", "key", v, http.Header{HeaderVersionID: {"v1"}})
			mu.Lock()
			defer mu.Unlock()
			if c.wantErr {
				if err == nil || !retryable(err) || !aborted {
					t.Fatalf("error %v (retryable %v), aborted %v; want a retryable error and the upload aborted", err, err != nil && retryable(err), aborted)
				}
				return
			}
			if err != nil || aborted || reopened != 1 {
				t.Fatalf("error %v, aborted %v, read again %d times; want the part sent again once and the copy done", err, aborted, reopened)
			}
			if !slices.Equal(sent, []string{"1", "2", "3"}) || !bytes.Equal(slices.Concat(got["1"], got["2"], got["3"]), whole) {
				t.Fatalf("parts taken %q (%d, %d, %d bytes), want 1, 2, 3 with the version's bytes", sent, len(got["1"]), len(got["2"]), len(got["3"]))
			}
			for i, p := range [][]byte{first, second, third} {
				if !strings.Contains(completed, fmt.Sprintf("<PartNumber>%d</PartNumber><ETag>&#34;%s&#34;</ETag>", i+1, md5Hex(p))) {
					t.Fatalf("completion %s lacks part %d's ETag", completed, i+1)
				}
			}
		})
	}
}

func mustB64(t *testing.T, s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("Content-MD5 %q: %v", s, err)
	}
	return b
}
