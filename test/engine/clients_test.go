package engine

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/tags"
)

// TestMinioClient runs the common operations through minio-go, which
// signs, streams (multipart above its part size) and lists its own way.
func TestMinioClient(t *testing.T) {
	t.Parallel()
	s := startServer(t, serverOpts{drives: 6})
	mc := s.minio()
	if err := mc.MakeBucket(ctx, "photos", minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	small := randomBytes(3000)
	big := randomBytes(17<<20 + 5)
	if _, err := mc.PutObject(ctx, "photos", "a/small.jpg", bytes.NewReader(small), int64(len(small)),
		minio.PutObjectOptions{ContentType: "image/jpeg", UserMetadata: map[string]string{"camera": "x100"}}); err != nil {
		t.Fatal(err)
	}
	// Unknown size and a 5 MiB part size: minio-go streams a multipart upload.
	info, err := mc.PutObject(ctx, "photos", "b/big.raw", bytes.NewReader(big), -1, minio.PutObjectOptions{PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(big)) {
		t.Fatalf("big upload size %d", info.Size)
	}
	for key, want := range map[string][]byte{"a/small.jpg": small, "b/big.raw": big} {
		o, err := mc.GetObject(ctx, "photos", key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o)
		o.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s read back wrong: %v", key, err)
		}
	}
	st, err := mc.StatObject(ctx, "photos", "a/small.jpg", minio.StatObjectOptions{})
	if err != nil || st.ContentType != "image/jpeg" || st.UserMetadata["Camera"] != "x100" {
		t.Fatalf("stat: %+v %v", st, err)
	}
	var keys []string
	for o := range mc.ListObjects(ctx, "photos", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if !slices.Equal(keys, []string{"a/small.jpg", "b/big.raw"}) {
		t.Fatalf("minio listing: %v", keys)
	}
	if _, err := mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: "photos", Object: "c/copy.jpg"}, minio.CopySrcOptions{Bucket: "photos", Object: "a/small.jpg"}); err != nil {
		t.Fatal(err)
	}
	tg, _ := tags.NewTags(map[string]string{"album": "2026"}, true)
	if err := mc.PutObjectTagging(ctx, "photos", "c/copy.jpg", tg, minio.PutObjectTaggingOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := mc.GetObjectTagging(ctx, "photos", "c/copy.jpg", minio.GetObjectTaggingOptions{})
	if err != nil || got.ToMap()["album"] != "2026" {
		t.Fatalf("tags: %v %v", got, err)
	}
	if err := mc.EnableVersioning(ctx, "photos"); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.PutObject(ctx, "photos", "a/small.jpg", bytes.NewReader([]byte("v2")), 2, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	versions := 0
	for o := range mc.ListObjects(ctx, "photos", minio.ListObjectsOptions{WithVersions: true, Prefix: "a/"}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		versions++
	}
	if versions != 2 {
		t.Fatalf("versions of a/small.jpg: %d", versions)
	}
	if err := mc.RemoveObject(ctx, "photos", "c/copy.jpg", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.StatObject(ctx, "photos", "c/copy.jpg", minio.StatObjectOptions{}); err == nil {
		t.Fatal("removed object still there")
	}
}

// TestUsersFromTheIAMFile: users of the mounted users file get what their
// policy grants, on their buckets only, and changes to the file apply
// without a restart.
func TestUsersFromTheIAMFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	usersFile := filepath.Join(dir, "users.json")
	writeUsers := func(users ...map[string]any) {
		b, _ := json.Marshal(map[string]any{"users": users})
		if err := os.WriteFile(usersFile+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(usersFile+".tmp", usersFile); err != nil {
			t.Fatal(err)
		}
	}
	writeUsers(
		map[string]any{"accessKey": "reader", "secretKey": "reader-secret", "policy": "readonly", "buckets": []string{"photos"}},
		map[string]any{"accessKey": "writer", "secretKey": "writer-secret", "policy": "readwrite"},
	)
	s := startServer(t, serverOpts{drives: 4, env: []string{"STRATA_IAM_FILE=" + usersFile}})
	root := s.aws()
	mustCreateBucket(t, root, "photos")
	mustCreateBucket(t, root, "private")
	put(t, root, "photos", "p.jpg", []byte("pic"))
	put(t, root, "private", "secret.txt", []byte("no"))

	reader := s.s3Client("reader", "reader-secret")
	if got := get(t, reader, "photos", "p.jpg"); string(got) != "pic" {
		t.Fatalf("reader GET: %q", got)
	}
	if _, err := reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("x"), Body: strings.NewReader("x")}); errCode(err) != "AccessDenied" {
		t.Fatalf("read-only user PUT: %v", err)
	}
	if _, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("private"), Key: aws.String("secret.txt")}); errCode(err) != "AccessDenied" {
		t.Fatalf("reader on another bucket: %v", err)
	}
	lb, err := reader.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != "photos" {
		t.Fatalf("reader sees buckets %+v (%v)", lb, err)
	}
	writer := s.s3Client("writer", "writer-secret")
	put(t, writer, "private", "w.txt", []byte("w"))
	mustCreateBucket(t, writer, "writers")
	checkPoliciesWithUsers(t, root, reader, writer)

	// Remove the reader: within a few seconds its key stops working.
	writeUsers(map[string]any{"accessKey": "writer", "secretKey": "writer-secret", "policy": "readwrite"})
	waitFor(t, "removed user refused", 30*time.Second, func() bool {
		_, err := reader.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("p.jpg")})
		return errCode(err) == "InvalidAccessKeyId"
	})
	// A broken file is reported and the previous users kept.
	if err := os.WriteFile(usersFile, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(6 * time.Second)
	put(t, writer, "private", "still.txt", []byte("ok"))
	if !strings.Contains(s.logs(), "users file not reloaded") {
		t.Fatal("a broken users file was not reported")
	}
}

// checkPoliciesWithUsers: a user's grant is its identity policy, and
// bucket policies sit beside it as in AWS: a bucket policy can grant a
// user more than its grant (reader gets private/s.txt... only through the
// policy) and an explicit Deny in it wins over a grant. A bucket belongs
// to the user who created it. Buckets: photos (reader's), private (holds
// s.txt or secret.txt), writers (created by writer).
func checkPoliciesWithUsers(t *testing.T, root, reader, writer *s3.Client) {
	t.Helper()
	acl, err := root.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: aws.String("writers")})
	if err != nil || aws.ToString(acl.Owner.ID) != "writer" {
		t.Fatalf("owner of a bucket a user created: %+v (%v)", acl, err)
	}
	if _, err := root.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: aws.String("photos")}); errCode(err) != "NoSuchBucketPolicy" {
		t.Fatalf("users' grants are not bucket policies: %v", err)
	}
	put(t, root, "private", "shared.txt", []byte("shared"))
	if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("private"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["reader"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::private/shared.txt"]}]}`)}); err != nil {
		t.Fatal(err)
	}
	if got := get(t, reader, "private", "shared.txt"); string(got) != "shared" {
		t.Fatalf("bucket policy grant: %q", got)
	}
	if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("photos"), Policy: aws.String(
		`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":{"AWS":["writer"]},"Action":["s3:PutObject"],"Resource":["arn:aws:s3:::photos/*"]}]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("w"), Body: strings.NewReader("w")}); errCode(err) != "AccessDenied" {
		t.Fatalf("explicit deny over a readwrite grant: %v", err)
	}
	if _, err := root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: aws.String("photos")}); err != nil {
		t.Fatal(err)
	}
	put(t, writer, "photos", "w", []byte("w"))
}

// writeCert writes a self-signed certificate for 127.0.0.1 into dir and
// returns it.
func writeCert(t *testing.T, dir string, serial int64) *x509.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "strata-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	_ = os.WriteFile(filepath.Join(dir, "tls.key.new"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "tls.crt.new"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.Rename(filepath.Join(dir, "tls.key.new"), filepath.Join(dir, "tls.key"))
	_ = os.Rename(filepath.Join(dir, "tls.crt.new"), filepath.Join(dir, "tls.crt"))
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// TestTLSAndCertificateRotation: with --certs-dir the server speaks TLS,
// and a certificate replaced on disk is served without a restart.
func TestTLSAndCertificateRotation(t *testing.T) {
	t.Parallel()
	certs := t.TempDir()
	first := writeCert(t, certs, 1)
	s := &server{t: t, addr: freeAddr(t)}
	root := t.TempDir()
	for i := 1; i <= 4; i++ {
		s.drives = append(s.drives, filepath.Join(root, "d"+string(rune('0'+i))))
	}
	s.args = append([]string{"server", "--address", s.addr, "--certs-dir", certs, "--certs-reload-interval", "500ms", "--shutdown-delay", "0s"}, s.drives...)
	s.startProcess()
	t.Cleanup(s.kill)
	served := func() *big.Int {
		conn, err := tls.Dial("tcp", s.addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	waitFor(t, "TLS listener up", 30*time.Second, func() bool { return served() != nil })
	if served().Cmp(first.SerialNumber) != 0 {
		t.Fatal("not serving the first certificate")
	}
	pool := x509.NewCertPool()
	pool.AddCert(first)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	mc, err := minio.New(s.addr, &minio.Options{Creds: miniocreds.NewStaticV4(rootUser, rootPassword, ""), Secure: true,
		Transport: hc.Transport, Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The process's credentials come from the environment set by startProcess.
	if err := mc.MakeBucket(ctx, "secure", minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("S3 over TLS: %v", err)
	}
	second := writeCert(t, certs, 2)
	waitFor(t, "rotated certificate served", 30*time.Second, func() bool {
		sn := served()
		return sn != nil && sn.Cmp(second.SerialNumber) == 0
	})
}
