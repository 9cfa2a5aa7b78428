package s3api

import (
	"net/http"
	"testing"
)

// Server-side encryption parameters are checked as S3 checks them before
// anything is encrypted: a well-formed request of any mode passes (keys
// are resolved later, after the access decision), a malformed one is
// InvalidArgument.
func TestSSEParametersChecked(t *testing.T) {
	const key = "pO3upElrwuEXSoFwCfnZPdSsmt/xWeFa0N9KgDijwVs="
	const keyMD5 = "DWygnHRtgiJ77HCm+1rvHw=="
	customer := map[string]string{hdrSSECAlg: "AES256", hdrSSECKey: key, hdrSSECKeyMD5: keyMD5}
	with := func(base map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(out, kv[i])
			} else {
				out[kv[i]] = kv[i+1]
			}
		}
		return out
	}
	for _, c := range []struct {
		what string
		hdr  map[string]string
		read bool
		want string
	}{
		{"none", nil, false, ""},
		{"SSE-S3", map[string]string{hdrSSE: "AES256"}, false, ""},
		{"SSE-KMS with a key", map[string]string{hdrSSE: "aws:kms", hdrSSEKMSKey: "k"}, false, ""},
		{"SSE-KMS with context and bucket key", map[string]string{hdrSSE: "aws:kms", hdrSSEContext: "e30=", hdrSSEBucketKey: "true"}, false, ""},
		{"DSSE-KMS", map[string]string{hdrSSE: "aws:kms:dsse"}, false, ""},
		{"unknown method", map[string]string{hdrSSE: "aes:kms"}, false, "InvalidArgument"},
		{"SSE header on a read", map[string]string{hdrSSE: "AES256"}, true, "InvalidArgument"},
		{"KMS key without aws:kms", map[string]string{hdrSSEKMSKey: "k"}, false, "InvalidArgument"},
		{"KMS context without aws:kms", map[string]string{hdrSSEContext: "e30="}, false, "InvalidArgument"},
		{"bucket key without aws:kms", map[string]string{hdrSSEBucketKey: "true"}, false, "InvalidArgument"},
		{"KMS key with AES256", map[string]string{hdrSSE: "AES256", hdrSSEKMSKey: "k"}, false, "InvalidArgument"},
		{"SSE-C write", customer, false, ""},
		{"SSE-C read", customer, true, ""},
		{"SSE-C, MD5 of another key", with(customer, hdrSSECKeyMD5, "AAAAAAAAAAAAAAAAAAAAAA=="), false, "InvalidArgument"},
		{"SSE-C, key too short", with(customer, hdrSSECKey, "c2hvcnQ=", hdrSSECKeyMD5, "TwnaqdlbyxZqMCQHoOC6vg=="), false, "InvalidArgument"},
		{"SSE-C, key not base64", with(customer, hdrSSECKey, "not base64!"), false, "InvalidArgument"},
		{"SSE-C without MD5", with(customer, hdrSSECKeyMD5, ""), false, "InvalidArgument"},
		{"SSE-C without algorithm", with(customer, hdrSSECAlg, ""), false, "InvalidArgument"},
		{"SSE-C, another algorithm", with(customer, hdrSSECAlg, "AES128"), false, "InvalidArgument"},
		{"SSE-C without key", with(customer, hdrSSECKey, ""), false, "InvalidArgument"},
		{"SSE-C and SSE-S3", with(customer, hdrSSE, "AES256"), false, "InvalidArgument"},
		{"copy source SSE-C", map[string]string{hdrCopySSEC + "Algorithm": "AES256", hdrCopySSEC + "Key": key, hdrCopySSEC + "Key-Md5": keyMD5}, false, ""},
		{"copy source SSE-C, algorithm only", map[string]string{hdrCopySSEC + "Algorithm": "AES256"}, false, "InvalidArgument"},
	} {
		h := http.Header{}
		for k, v := range c.hdr {
			h.Set(k, v)
		}
		r := &request{header: h}
		if got := codeOf(r.checkSSE(c.read)); got != c.want {
			t.Errorf("%s (read=%v): %q, want %q", c.what, c.read, got, c.want)
		}
	}
}
