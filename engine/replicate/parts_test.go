package replicate

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
