package engine

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestFormUploadsSignedWithV2 sends browser form uploads (POST object)
// signed with Signature Version 2, as boto3's generate_presigned_post makes
// them, to the server and the gateway: the upload is stored; a wrong
// signature, an unknown key or a key outside the policy is refused and
// stores nothing; forms whose every field is sent as a file part (Python's
// requests with files=) work too.
func TestFormUploadsSignedWithV2(t *testing.T) {
	t.Parallel()
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
				stored         string // the key stored, when not key
			}{
				{"browser form", "up/one", rootUser, rootPassword, false, http.StatusNoContent, "", ""},
				// ${filename} is the file part's name, before the policy's
				// conditions are checked.
				{"key from the file's name", "up/${filename}", rootUser, rootPassword, false, http.StatusNoContent, "", "up/upload.txt"},
				{"every field a file part", "up/two", rootUser, rootPassword, true, http.StatusNoContent, "", ""},
				{"wrong signature", "up/three", rootUser, "not-the-secret", false, http.StatusForbidden, "SignatureDoesNotMatch", ""},
				{"unknown access key", "up/four", "nobody", rootPassword, false, http.StatusForbidden, "InvalidAccessKeyId", ""},
				{"key outside the policy", "elsewhere", rootUser, rootPassword, false, http.StatusForbidden, "AccessDenied", ""},
			}
			for _, tc := range cases {
				body := "content of " + tc.key
				status, answer := postForm(t, s.url()+"/forms", form(tc.key, tc.access, tc.secret), tc.fieldsAsFiles, body)
				if status != tc.status || !strings.Contains(answer, tc.code) {
					t.Errorf("%s: %d %s, want %d %s", tc.what, status, answer, tc.status, tc.code)
				}
				stored := tc.key
				if tc.stored != "" {
					stored = tc.stored
				}
				got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("forms"), Key: aws.String(stored)})
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
	return postFormWith(t, http.DefaultClient, url, fields, fieldsAsFiles, file)
}

// postFormWith is postForm through hc; fields other than the five of a V2
// form follow them in name order.
func postFormWith(t *testing.T, hc *http.Client, url string, fields map[string]string, fieldsAsFiles bool, file string) (int, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	names := []string{"key", "AWSAccessKeyId", "policy", "signature", "Content-Type"}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(names[:5], name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
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
	resp, err := hc.Post(url, w.FormDataContentType(), &b)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// TestFormUploadFields: a browser form asking for encryption in its
// fields (x-amz-server-side-encryption...) is stored encrypted by the
// server, over HTTPS: SSE-C readable only with the customer's key, SSE-S3
// reported as such; a malformed customer key is refused and stores
// nothing. Object lock fields (mode, retain-until date, legal hold) and the
// acl field are honoured too, a malformed one refused. The gateway takes
// the same fields: a legal hold into a bucket with object lock is kept,
// into one without is refused as S3 refuses it, and SSE-S3 without keys
// configured is refused rather than the file stored unencrypted.
func TestFormUploadFields(t *testing.T) {
	t.Parallel()
	tg := startTLSTargetWith(t, "server", []string{"STRATA_KMS_KEYS_FILE=" + keysFile(t, "tenant-1")})
	c := tg.sdkClient(nil)
	mustCreateBucket(t, c, "forms")
	// The policy covers every field of the form it signs.
	form := func(key string, extra map[string]string) map[string]string {
		conds := []any{map[string]string{"bucket": "forms"}, []any{"starts-with", "$key", "up/"}, []any{"starts-with", "$Content-Type", "text/"}}
		for _, name := range slices.Sorted(maps.Keys(extra)) {
			conds = append(conds, []any{"starts-with", "$" + name, ""})
		}
		policy := v2Policy(t, map[string]any{"expiration": time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05Z"), "conditions": conds})
		f := map[string]string{"key": key, "AWSAccessKeyId": rootUser, "policy": policy,
			"signature": v2Sign(rootPassword, policy), "Content-Type": "text/plain"}
		maps.Copy(f, extra)
		return f
	}
	const key, keyMD5 = "pO3upElrwuEXSoFwCfnZPdSsmt/xWeFa0N9KgDijwVs=", "DWygnHRtgiJ77HCm+1rvHw=="
	sseC := map[string]string{"x-amz-server-side-encryption-customer-algorithm": "AES256",
		"x-amz-server-side-encryption-customer-key": key, "x-amz-server-side-encryption-customer-key-md5": keyMD5}
	if status, answer := postFormWith(t, tg.httpClient(), tg.endpoint()+"/forms", form("up/sse-c", sseC), false, "secret form"); status != http.StatusNoContent {
		t.Fatalf("SSE-C form: %d %s", status, answer)
	}
	if _, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("forms"), Key: aws.String("up/sse-c")}); errCode(err) != "InvalidRequest" {
		t.Errorf("GET of the SSE-C form upload without its key: %v, want InvalidRequest", err)
	}
	got, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("forms"), Key: aws.String("up/sse-c"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(key), SSECustomerKeyMD5: aws.String(keyMD5)})
	if err != nil {
		t.Fatalf("GET of the SSE-C form upload with its key: %v", err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if string(b) != "secret form" {
		t.Errorf("SSE-C form upload read back %q", b)
	}

	if status, answer := postFormWith(t, tg.httpClient(), tg.endpoint()+"/forms", form("up/sse-s3", map[string]string{"x-amz-server-side-encryption": "AES256"}), false, "x"); status != http.StatusNoContent {
		t.Fatalf("SSE-S3 form: %d %s", status, answer)
	}
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String("up/sse-s3")}); err != nil || h.ServerSideEncryption != "AES256" {
		t.Errorf("HEAD of the SSE-S3 form upload: %v (%v), want AES256", h, err)
	}

	bad := maps.Clone(sseC)
	bad["x-amz-server-side-encryption-customer-key-md5"] = "AAAAAAAAAAAAAAAAAAAAAA=="
	if status, answer := postFormWith(t, tg.httpClient(), tg.endpoint()+"/forms", form("up/bad", bad), false, "x"); status != http.StatusBadRequest || !strings.Contains(answer, "InvalidArgument") {
		t.Errorf("SSE-C form with a wrong key MD5: %d %s, want 400 InvalidArgument", status, answer)
	}
	notStored(t, c, "forms", "up/bad")

	// Object lock and the object's ACL from the form's fields.
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("vault"), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	vaultForm := func(key string, extra map[string]string) map[string]string {
		f := form(key, extra)
		p, _ := base64.StdEncoding.DecodeString(f["policy"])
		p = bytes.Replace(p, []byte(`"forms"`), []byte(`"vault"`), 1)
		f["policy"] = base64.StdEncoding.EncodeToString(p)
		f["signature"] = v2Sign(rootPassword, f["policy"])
		return f
	}
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if status, answer := postFormWith(t, tg.httpClient(), tg.endpoint()+"/vault", vaultForm("up/locked", map[string]string{
		"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": until, "x-amz-object-lock-legal-hold": "ON", "acl": "public-read"}), false, "x"); status != http.StatusNoContent {
		t.Fatalf("form with object lock: %d %s", status, answer)
	}
	if r, err := c.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String("vault"), Key: aws.String("up/locked")}); err != nil || r.Retention.Mode != types.ObjectLockRetentionModeGovernance {
		t.Errorf("retention of the form upload: %+v (%v), want GOVERNANCE", r, err)
	}
	if h, err := c.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String("vault"), Key: aws.String("up/locked")}); err != nil || h.LegalHold.Status != types.ObjectLockLegalHoldStatusOn {
		t.Errorf("legal hold of the form upload: %+v (%v), want ON", h, err)
	}
	h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("vault"), Key: aws.String("up/locked")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("up/locked"), VersionId: h.VersionId}); errCode(err) != "AccessDenied" {
		t.Errorf("delete of the locked form upload: %v, want AccessDenied", err)
	}
	acl, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: aws.String("vault"), Key: aws.String("up/locked")})
	if err != nil || !slices.ContainsFunc(acl.Grants, func(g types.Grant) bool {
		return g.Grantee != nil && strings.HasSuffix(aws.ToString(g.Grantee.URI), "/AllUsers") && g.Permission == types.PermissionRead
	}) {
		t.Errorf("ACL of the form upload with acl=public-read: %+v (%v)", acl, err)
	}
	if status, answer := postFormWith(t, tg.httpClient(), tg.endpoint()+"/vault", vaultForm("up/badlock", map[string]string{
		"x-amz-object-lock-mode": "FOREVER", "x-amz-object-lock-retain-until-date": until}), false, "x"); status != http.StatusBadRequest {
		t.Errorf("form with an unknown lock mode: %d %s, want 400", status, answer)
	}
	notStored(t, c, "vault", "up/badlock")

	gw := startGateway(t, t.TempDir())
	gc := gw.aws()
	mustCreateBucket(t, gc, "forms")
	if status, answer := postForm(t, gw.url()+"/forms", form("up/sse-s3", map[string]string{"x-amz-server-side-encryption": "AES256"}), false, "x"); status != http.StatusNotImplemented {
		t.Errorf("SSE-S3 form to the gateway: %d %s, want 501 NotImplemented", status, answer)
	}
	notStored(t, gc, "forms", "up/sse-s3")
	if status, answer := postForm(t, gw.url()+"/forms", form("up/locked", map[string]string{"x-amz-object-lock-legal-hold": "ON"}), false, "x"); status != http.StatusBadRequest ||
		!strings.Contains(answer, "InvalidRequest") {
		t.Errorf("form with a legal hold to a gateway bucket without object lock: %d %s, want 400 InvalidRequest", status, answer)
	}
	notStored(t, gc, "forms", "up/locked")
	if _, err := gc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("vault"), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if status, answer := postForm(t, gw.url()+"/vault", vaultForm("up/held", map[string]string{"x-amz-object-lock-legal-hold": "ON"}), false, "x"); status != http.StatusNoContent {
		t.Fatalf("form with a legal hold to the gateway: %d %s", status, answer)
	}
	if h, err := gc.GetObjectLegalHold(ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String("vault"), Key: aws.String("up/held")}); err != nil || h.LegalHold.Status != types.ObjectLockLegalHoldStatusOn {
		t.Errorf("legal hold of the gateway's form upload: %+v (%v), want ON", h, err)
	}
}

// sendForm posts an unauthenticated multipart form whose file part is size
// bytes to bucket, calling during once 20 MiB of it are sent (if the server
// reads that far); it returns the answer's status, or 0 when the server
// closed the connection first.
func sendForm(t *testing.T, addr, bucket string, size int, during func()) int {
	t.Helper()
	const boundary = "strataformboundary"
	head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nobj\r\n--" + boundary +
		"\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\nContent-Type: application/octet-stream\r\n\r\n"
	tail := "\r\n--" + boundary + "--\r\n"
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	go func() {
		_, _ = fmt.Fprintf(conn, "POST /%s HTTP/1.1\r\nHost: %s\r\nContent-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n%s",
			bucket, addr, boundary, len(head)+size+len(tail), head)
		block := bytes.Repeat([]byte("A"), 1<<20)
		for sent := 0; sent < size; sent += len(block) {
			if sent >= 20<<20 && during != nil {
				during()
				during = nil
			}
			if _, err := conn.Write(block[:min(len(block), size-sent)]); err != nil {
				return // refused: the server closed the connection
			}
		}
		_, _ = io.WriteString(conn, tail)
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// filesUnder counts the regular files under dir.
func filesUnder(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestFormsNeverSpillToDisk: a form upload's policy and signature are
// checked before its file part is read, and the file is streamed to
// storage, never kept. An unauthenticated 48 MiB form is refused (4xx)
// and nothing is written to the temporary directory the process was
// given; a small one gets the same S3 answer. --form-spill-dir, which
// once let forms over 16 MiB spill there, is accepted and ignored (a
// warning says so), so deployments that pass it still start.
func TestFormsNeverSpillToDisk(t *testing.T) {
	t.Parallel()
	tmp, spill := t.TempDir(), t.TempDir()
	s := startServer(t, serverOpts{drives: 4, env: []string{"TMPDIR=" + tmp}, extra: []string{"--form-spill-dir", spill}})
	mustCreateBucket(t, s.aws(), "forms")
	for _, size := range []int{48 << 20, 1 << 20} {
		seen := -1
		status := sendForm(t, s.addr, "forms", size, func() { seen = filesUnder(t, tmp) + filesUnder(t, spill) })
		if status != 0 && (status < 400 || status >= 500) {
			t.Fatalf("an unauthenticated form of %d bytes: status %d, want an S3 refusal (4xx) or the connection closed", size, status)
		}
		if seen > 0 || filesUnder(t, tmp)+filesUnder(t, spill) != 0 {
			t.Fatalf("the form was written to a temporary directory (%d files during, %d after)", seen, filesUnder(t, tmp)+filesUnder(t, spill))
		}
	}
	if _, err := s.aws().HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String("forms"), Key: aws.String("obj")}); errCode(err) != "NotFound" {
		t.Fatalf("an unauthenticated form stored an object: %v", err)
	}
	if !strings.Contains(s.logs(), "--form-spill-dir is ignored") {
		t.Error("no warning that --form-spill-dir is ignored")
	}
}
