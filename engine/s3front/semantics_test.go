package s3front

import (
	"errors"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/s3err"
)

func code(err error) string {
	var e s3err.S3Error
	if errors.As(err, &e) {
		return e.BaseError().Code
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

func TestPutConditionsAsS3(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		exists             bool
		ifMatch, ifNoneMat *string
		want               string
	}{
		{false, nil, nil, ""},
		{false, s("*"), nil, "NoSuchKey"},
		{false, s("abc"), nil, "NoSuchKey"},
		{true, s("*"), nil, ""},
		{true, s(`"abc"`), nil, ""},
		{true, s("other"), nil, "PreconditionFailed"},
		{true, nil, s("*"), "PreconditionFailed"},
		{true, nil, s("abc"), "PreconditionFailed"},
		{true, nil, s("other"), ""},
		{false, nil, s("*"), ""},
	} {
		if got := code(putConditions("abc", c.exists, c.ifMatch, c.ifNoneMat)); got != c.want {
			t.Errorf("exists=%v If-Match=%v If-None-Match=%v: %q, want %q", c.exists, c.ifMatch, c.ifNoneMat, got, c.want)
		}
	}
}

func TestStoredEncodingDropsAwsChunked(t *testing.T) {
	for in, want := range map[string]string{
		"gzip": "gzip", "deflate,gzip": "deflate,gzip", "gzip, aws-chunked": "gzip",
		"aws-chunked, gzip": "gzip", "aws-chunked": "", "aws-chunked, aws-chunked": "",
	} {
		if got := *storedEncoding(&in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestOnlyGrantee(t *testing.T) {
	for h, want := range map[string]bool{
		`id="alice"`: true, `id=alice`: true, `id="alice", id="alice"`: true,
		`id="alice", id="bob"`: false, `emailAddress="a@b"`: false, `uri="http://acs.amazonaws.com/groups/global/AllUsers"`: false,
	} {
		if got := onlyGrantee(h, "alice"); got != want {
			t.Errorf("%s: %v, want %v", h, got, want)
		}
	}
}

func TestSSEHeadersCheckedThenRefused(t *testing.T) {
	const key = "pO3upElrwuEXSoFwCfnZPdSsmt/xWeFa0N9KgDijwVs="
	const md5 = "DWygnHRtgiJ77HCm+1rvHw=="
	for _, c := range []struct {
		hdr  map[string]string
		read bool
		want string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{hdrSSE: "AES256"}, false, "NotImplemented"},
		{map[string]string{hdrSSE: "aws:kms", hdrSSEKMSKey: "k"}, false, "NotImplemented"},
		{map[string]string{hdrSSE: "aes:kms"}, false, "InvalidArgument"},
		{map[string]string{hdrSSE: "AES256"}, true, "InvalidArgument"},
		{map[string]string{hdrSSEKMSKey: "k"}, false, "InvalidArgument"},
		{map[string]string{hdrSSE: "AES256", hdrSSEKMSKey: "k"}, false, "InvalidArgument"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key, hdrSSECKeyMD5: md5}, false, "NotImplemented"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key, hdrSSECKeyMD5: md5}, true, "InvalidRequest"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key, hdrSSECKeyMD5: "AAAAAAAAAAAAAAAAAAAAAA=="}, false, "InvalidArgument"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key}, false, "InvalidArgument"},
		{map[string]string{hdrSSECKey: key, hdrSSECKeyMD5: md5}, false, "InvalidArgument"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKeyMD5: md5}, false, "InvalidArgument"},
		{map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key, hdrSSECKeyMD5: md5, hdrSSE: "AES256"}, false, "InvalidArgument"},
		{map[string]string{hdrCopySSEC + "Algorithm": "AES256", hdrCopySSEC + "Key": key, hdrCopySSEC + "Key-Md5": md5}, false, "NotImplemented"},
		{map[string]string{hdrCopySSEC + "Algorithm": "AES256"}, false, "InvalidArgument"},
	} {
		got := ""
		if err := checkSSE(func(k string) string { return c.hdr[k] }, c.read, false); err != nil {
			got = err.Code
		}
		if got != c.want {
			t.Errorf("%v read=%v: %q, want %q", c.hdr, c.read, got, c.want)
		}
		// Where the backend encrypts, only malformed requests are refused.
		got = ""
		if err := checkSSE(func(k string) string { return c.hdr[k] }, c.read, true); err != nil {
			got = err.Code
		}
		if want := c.want; (want == "NotImplemented" || want == "InvalidRequest") && got != "" || want == "InvalidArgument" && got != want {
			t.Errorf("implemented, %v read=%v: %q", c.hdr, c.read, got)
		}
	}
}

func TestResponseFixups(t *testing.T) {
	acl := objectACLAnswer([]byte(`<?xml version="1.0" encoding="UTF-8"?>
<GetObjectAclOutput><Grants><Grantee><Type>CanonicalUser</Type><DisplayName>me</DisplayName><ID>me</ID></Grantee><Permission>FULL_CONTROL</Permission></Grants><Owner><DisplayName>me</DisplayName><ID>me</ID></Owner></GetObjectAclOutput>`))
	for _, want := range []string{"<AccessControlPolicy", "<Owner><ID>me</ID>", "<AccessControlList><Grant><Grantee", `xsi:type="CanonicalUser"`, "<Permission>FULL_CONTROL</Permission>"} {
		if !strings.Contains(string(acl), want) {
			t.Errorf("object ACL lacks %s: %s", want, acl)
		}
	}
	tags := sortedTags([]byte(`<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>b</Key><Value>1</Value></Tag><Tag><Key>a</Key><Value></Value></Tag></TagSet></Tagging>`))
	if i, j := strings.Index(string(tags), "<Key>a</Key>"), strings.Index(string(tags), "<Key>b</Key>"); i < 0 || j < i {
		t.Errorf("tags not sorted: %s", tags)
	}
	if sortedTags([]byte(`<Tagging><TagSet><Tag><Key>a</Key><Value/></Tag></TagSet></Tagging>`)) != nil {
		t.Error("sorted tags rewritten")
	}
	parts := withPartsCount([]byte(`<GetObjectAttributesResponse><ObjectParts><MaxParts>1000</MaxParts></ObjectParts></GetObjectAttributesResponse>`), 3)
	if !strings.Contains(string(parts), "<ObjectParts><PartsCount>3</PartsCount><MaxParts>") {
		t.Errorf("parts count: %s", parts)
	}
}

// TestV2StringToSign checks the V2 string to sign against the example of
// the S3 documentation (REST authentication, "Object GET").
func TestV2StringToSign(t *testing.T) {
	app := fiber.New()
	rc := &fasthttp.RequestCtx{}
	rc.Request.Header.SetMethod("GET")
	rc.Request.SetRequestURI("/awsexamplebucket1/photos/puppy.jpg")
	rc.Request.Header.Set("Date", "Tue, 27 Mar 2007 19:36:42 +0000")
	c := app.AcquireCtx(rc)
	defer app.ReleaseCtx(c)
	want := "GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/awsexamplebucket1/photos/puppy.jpg"
	if got := v2StringToSign(c, "Tue, 27 Mar 2007 19:36:42 +0000", "/awsexamplebucket1/photos/puppy.jpg"); got != want {
		t.Fatalf("string to sign %q, want %q", got, want)
	}
	if !v2Matches(c, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", []string{"Tue, 27 Mar 2007 19:36:42 +0000"}) {
		t.Fatal("the documentation's signature does not verify")
	}
	if v2Matches(c, "another-secret", "qgk2+6Sv9/oM7G3qLEjTH1a1l1g=", []string{"Tue, 27 Mar 2007 19:36:42 +0000"}) {
		t.Fatal("a signature verified with the wrong secret")
	}
	rc.Request.SetRequestURI("/bucket/key?acl&versionId=3&prefix=x&response-content-type=a/b")
	rc.Request.Header.Set("X-Amz-Meta-B", "2")
	rc.Request.Header.Add("X-Amz-Meta-A", " 1 ")
	want = "GET\n\n\nd\nx-amz-meta-a:1\nx-amz-meta-b:2\n/bucket/key?acl&response-content-type=a/b&versionId=3"
	if got := v2StringToSign(c, "d", "/bucket/key"); got != want {
		t.Fatalf("string to sign %q, want %q", got, want)
	}
}

func TestCanonicalPath(t *testing.T) {
	for in, want := range map[string]string{"/b/a b+c/ü.txt": "/b/a%20b%2Bc/%C3%BC.txt", "/b/k~-_.": "/b/k~-_."} {
		if got := canonicalPath(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
