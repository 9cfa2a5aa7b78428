package s3sig

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"testing"
	"time"
)

// The examples of AWS's "Signing and authenticating REST requests"
// (Signature Version 2): virtual-hosted requests to the johnsmith bucket.
const (
	docAccess = "AKIAIOSFODNN7EXAMPLE"
	docSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func docSecrets() Secrets {
	return SecretsFunc(func(k string) (string, bool) { return docSecret, k == docAccess })
}

func TestV2HeaderDocumentVectors(t *testing.T) {
	cases := []struct {
		name, method, url, bucket, sig string
		headers                        map[string]string
		now                            time.Time
	}{
		{"object GET", "GET", "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg", "johnsmith", "bWq2s1WEIj+Ydj0vQ697zp+IXMU=",
			map[string]string{"Date": "Tue, 27 Mar 2007 19:36:42 +0000"}, time.Date(2007, 3, 27, 19, 36, 42, 0, time.UTC)},
		{"object PUT", "PUT", "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg", "johnsmith", "MyyxeRY7whkBe+bq8fHCL/2kKUg=",
			map[string]string{"Date": "Tue, 27 Mar 2007 21:15:45 +0000", "Content-Type": "image/jpeg"}, time.Date(2007, 3, 27, 21, 15, 45, 0, time.UTC)},
		{"list", "GET", "http://johnsmith.s3.amazonaws.com/?prefix=photos&max-keys=50&marker=puppy", "johnsmith", "htDYFYduRNen8P9ZfE/s9SuKy0U=",
			map[string]string{"Date": "Tue, 27 Mar 2007 19:42:41 +0000"}, time.Date(2007, 3, 27, 19, 42, 41, 0, time.UTC)},
		{"acl", "GET", "http://johnsmith.s3.amazonaws.com/?acl", "johnsmith", "c2WLPFtWHVgbEmeEG93a4cG37dM=",
			map[string]string{"Date": "Tue, 27 Mar 2007 19:44:46 +0000"}, time.Date(2007, 3, 27, 19, 44, 46, 0, time.UTC)},
		{"delete with x-amz-date", "DELETE", "http://s3.amazonaws.com/johnsmith/photos/puppy.jpg", "", "lx3byBScXR6KzyMaifNkardMwNk=",
			map[string]string{"Date": "Tue, 27 Mar 2007 21:20:27 +0000", "X-Amz-Date": "Tue, 27 Mar 2007 21:20:26 +0000"}, time.Date(2007, 3, 27, 21, 20, 26, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, c.method, c.url, "")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			req.Header.Set("Authorization", "AWS "+docAccess+":"+c.sig)
			opts := Options{Now: func() time.Time { return c.now }, Bucket: c.bucket}
			a, err := Verify(req, docSecrets(), opts)
			if err != nil || a.Scheme != V2Header || a.AccessKey != docAccess {
				t.Fatalf("%+v %v", a, err)
			}
			req.Header.Set("Authorization", "AWS "+docAccess+":"+c.sig[:len(c.sig)-3]+"AA=")
			_, err = Verify(req, docSecrets(), opts)
			wantCode(t, "altered", err, "SignatureDoesNotMatch", 403)
		})
	}
}

func TestV2QueryDocumentVector(t *testing.T) {
	url := "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139620"
	before := Options{Bucket: "johnsmith", Now: func() time.Time { return time.Unix(1175139620-60, 0) }}
	a, err := Verify(newRequest(t, "GET", url, ""), docSecrets(), before)
	if err != nil || a.Scheme != V2Query || a.AccessKey != docAccess || a.Expires.Unix() != 1175139620 {
		t.Fatalf("%+v %v", a, err)
	}
	after := before
	after.Now = func() time.Time { return time.Unix(1175139621, 0) }
	_, err = Verify(newRequest(t, "GET", url, ""), docSecrets(), after)
	wantCode(t, "expired", err, "AccessDenied", 403)
	_, err = Verify(newRequest(t, "GET", url+"&versionId=1", ""), docSecrets(), before)
	wantCode(t, "sub-resource added", err, "SignatureDoesNotMatch", 403)
	_, err = Verify(newRequest(t, "GET", "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg?AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1175139620", ""), docSecrets(), before)
	wantCode(t, "no signature", err, "AccessDenied", 403)
}

// v2Sign signs like botocore's HmacV1Auth: the Date header on the date
// line, x-amz- headers, the path and signed sub-resources.
func v2Sign(secret, stringToSign string) string {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(stringToSign))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestV2HeaderCases are the s3-tests' V2 header cases (test_headers.py).
func TestV2HeaderCases(t *testing.T) {
	date := testNow.Format(http.TimeFormat)
	sign := func(r *http.Request) {
		sts := r.Method + "\n" + r.Header.Get("Content-Md5") + "\n" + r.Header.Get("Content-Type") + "\n" + r.Header.Get("Date") + "\n"
		if v, ok := r.Header["X-Amz-Date"]; ok {
			sts += "x-amz-date:" + v[0] + "\n"
		}
		if v := r.Header.Get("X-Amz-Meta-Foo"); v != "" {
			sts += "x-amz-meta-foo:" + v + "\n"
		}
		sts += "/bucket/foo"
		if r.URL.RawQuery != "" {
			sts += "?" + r.URL.RawQuery
		}
		r.Header.Set("Authorization", "AWS "+testAccess+":"+v2Sign(testSecret, sts))
	}
	cases := []struct {
		name   string
		set    func(r *http.Request)
		code   string
		status int
	}{
		{"signed", nil, "", 0},
		{"with a sub-resource and x-amz header", func(r *http.Request) {
			r.URL.RawQuery = "acl"
			r.Header.Set("X-Amz-Meta-Foo", "bar")
			r.Header.Set("Content-Type", "text/plain")
			r.Header.Set("Content-Md5", "rL0Y20xC+Fzt72VPzMSk2A==")
		}, "", 0},
		{"bad date", func(r *http.Request) { r.Header.Set("X-Amz-Date", "Bad Date") }, "AccessDenied", 403},
		{"empty date", func(r *http.Request) { r.Header.Set("X-Amz-Date", "") }, "AccessDenied", 403},
		{"no date", func(r *http.Request) { r.Header.Del("Date") }, "AccessDenied", 403},
		{"before today", func(r *http.Request) { r.Header.Set("X-Amz-Date", "Tue, 07 Jul 2010 21:53:04 GMT") }, "RequestTimeTooSkewed", 403},
		{"before epoch", func(r *http.Request) { r.Header.Set("X-Amz-Date", "Tue, 07 Jul 1950 21:53:04 GMT") }, "AccessDenied", 403},
		{"after end", func(r *http.Request) { r.Header.Set("X-Amz-Date", "Tue, 07 Jul 9999 21:53:04 GMT") }, "RequestTimeTooSkewed", 403},
		{"x-amz-date now", func(r *http.Request) { r.Header.Set("X-Amz-Date", date) }, "", 0},
	}
	for _, c := range cases {
		req := newRequest(t, http.MethodPut, testHost+"/bucket/foo", "bar")
		req.Header.Set("Date", date)
		if c.set != nil {
			c.set(req)
		}
		sign(req)
		a, err := Verify(req, testSecrets(), testOpts())
		wantCode(t, c.name, err, c.code, c.status)
		if err == nil && (a.Scheme != V2Header || a.AccessKey != testAccess) {
			t.Fatalf("%s: %+v", c.name, a)
		}
	}
	for _, authz := range []string{"AWS HAHAHA", "AWS :sig", "AWS key:"} {
		req := newRequest(t, http.MethodPut, testHost+"/bucket/foo", "bar")
		req.Header.Set("Date", date)
		req.Header.Set("Authorization", authz)
		_, err := Verify(req, testSecrets(), testOpts())
		wantCode(t, authz, err, "InvalidArgument", 400)
	}
	req := newRequest(t, http.MethodPut, testHost+"/bucket/foo", "bar")
	req.Header.Set("Date", date)
	req.Header.Set("Authorization", "AWS AKIAIGR7ZNNBHC5BKSUB:FWeDfwojDSdS2Ztmpfeubhd9isU=")
	_, err := Verify(req, testSecrets(), testOpts())
	wantCode(t, "unknown key", err, "InvalidAccessKeyId", 403)
}

// The V2 string to sign's canonical parts: x-amz- headers lower-cased,
// sorted, values trimmed and a repeated header's values joined by commas;
// only the signed sub-resources of the query, sorted, each with its
// decoded value or none; other parameters left out.
func TestV2StringToSignCanonicalParts(t *testing.T) {
	req := newRequest(t, "GET", "http://s3.example.com/bucket/key?versionId=3&prefix=x&acl&response-content-type=a%2Fb&uploads=", "")
	req.Header.Set("Content-Type", " text/plain ")
	req.Header.Set("X-Amz-Meta-B", "2")
	req.Header.Add("X-Amz-Meta-A", " 1 ")
	req.Header.Add("X-Amz-Meta-A", "one")
	req.Header.Set("X-Amz-Date", "Tue, 27 Mar 2007 21:20:26 +0000")
	req.Header.Set("X-Not-Amz", "ignored")
	want := "GET\n\ntext/plain\nd\n" +
		"x-amz-date:Tue, 27 Mar 2007 21:20:26 +0000\nx-amz-meta-a:1,one\nx-amz-meta-b:2\n" +
		"/bucket/key?acl&response-content-type=a/b&uploads=&versionId=3"
	if got := v2StringToSign(req, v2Date{line: "d"}, "/bucket/key"); got != want {
		t.Fatalf("string to sign\n%q\nwant\n%q", got, want)
	}
	// The AWS documentation's form: x-amz-date's value on the date line,
	// not among the headers.
	want = "GET\n\ntext/plain\nTue, 27 Mar 2007 21:20:26 +0000\n" +
		"x-amz-meta-a:1,one\nx-amz-meta-b:2\n" +
		"/bucket/key?acl&response-content-type=a/b&uploads=&versionId=3"
	if got := v2StringToSign(req, v2Date{line: "Tue, 27 Mar 2007 21:20:26 +0000", dropAmzDate: true}, "/bucket/key"); got != want {
		t.Fatalf("string to sign\n%q\nwant\n%q", got, want)
	}
}
