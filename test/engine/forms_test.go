package engine

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestFormUploadsSignedWithV2 sends browser form uploads (POST object)
// signed with Signature Version 2, as boto3's generate_presigned_post makes
// them, to the server and the gateway: the upload is stored; a wrong
// signature, an unknown key or a key outside the policy is refused and
// stores nothing; forms whose every field is sent as a file part (Python's
// requests with files=) work too.
func TestFormUploadsSignedWithV2(t *testing.T) {
	for _, kind := range []string{"server", "gateway"} {
		t.Run(kind, func(t *testing.T) {
			var s *server
			if kind == "server" {
				s = startServer(t, serverOpts{drives: 4})
			} else {
				s = startGateway(t, t.TempDir())
			}
			c := s.aws()
			mustCreateBucket(t, c, "forms")
			policy := v2Policy(t, map[string]any{
				"expiration": time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z"),
				"conditions": []any{
					map[string]string{"bucket": "forms"},
					[]any{"starts-with", "$key", "up/"},
					[]any{"starts-with", "$Content-Type", "text/"},
					[]any{"content-length-range", 0, 1 << 20},
				},
			})
			form := func(key, access, secret string) map[string]string {
				return map[string]string{"key": key, "AWSAccessKeyId": access, "policy": policy,
					"signature": v2Sign(secret, policy), "Content-Type": "text/plain"}
			}
			cases := []struct {
				what, key      string
				access, secret string
				fieldsAsFiles  bool
				status         int
				code           string
			}{
				{"browser form", "up/one", rootUser, rootPassword, false, http.StatusNoContent, ""},
				{"every field a file part", "up/two", rootUser, rootPassword, true, http.StatusNoContent, ""},
				{"wrong signature", "up/three", rootUser, "not-the-secret", false, http.StatusForbidden, "SignatureDoesNotMatch"},
				{"unknown access key", "up/four", "nobody", rootPassword, false, http.StatusForbidden, "InvalidAccessKeyId"},
				{"key outside the policy", "elsewhere", rootUser, rootPassword, false, http.StatusForbidden, "AccessDenied"},
			}
			for _, tc := range cases {
				body := "content of " + tc.key
				status, answer := postForm(t, s.url()+"/forms", form(tc.key, tc.access, tc.secret), tc.fieldsAsFiles, body)
				if status != tc.status || !strings.Contains(answer, tc.code) {
					t.Errorf("%s: %d %s, want %d %s", tc.what, status, answer, tc.status, tc.code)
				}
				got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("forms"), Key: aws.String(tc.key)})
				switch {
				case tc.status == http.StatusNoContent && err != nil:
					t.Errorf("%s: the upload is not readable: %v", tc.what, err)
				case tc.status == http.StatusNoContent:
					b, _ := io.ReadAll(got.Body)
					got.Body.Close()
					if string(b) != body || aws.ToString(got.ContentType) != "text/plain" {
						t.Errorf("%s: read back %q (%s)", tc.what, b, aws.ToString(got.ContentType))
					}
				case err == nil:
					got.Body.Close()
					t.Errorf("%s: refused, yet %s was stored", tc.what, tc.key)
				}
			}
		})
	}
}

func v2Policy(t *testing.T, doc map[string]any) string {
	t.Helper()
	j, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(j)
}

func v2Sign(secret, policy string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(policy))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// postForm sends a multipart form, its file last, and returns the status
// and the body of the answer.
func postForm(t *testing.T, url string, fields map[string]string, fieldsAsFiles bool, file string) (int, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, name := range []string{"key", "AWSAccessKeyId", "policy", "signature", "Content-Type"} {
		h := textproto.MIMEHeader{}
		disp := fmt.Sprintf(`form-data; name=%q`, name)
		if fieldsAsFiles {
			disp += fmt.Sprintf(`; filename=%q`, name)
		}
		h.Set("Content-Disposition", disp)
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write([]byte(fields[name])); err != nil {
			t.Fatal(err)
		}
	}
	fw, err := w.CreateFormFile("file", "upload.txt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write([]byte(file)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, w.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}
