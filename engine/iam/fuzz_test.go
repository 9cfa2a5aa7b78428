package iam

import (
	"testing"
)

// FuzzParseUsers: any users file is accepted or refused without
// panicking; an accepted one names each user once, never the root, with
// keys of the minimum lengths and a known policy.
func FuzzParseUsers(f *testing.F) {
	f.Add([]byte(`{"users":[{"accessKey":"reader-01","secretKey":"0123456789abcdef","policy":"readonly","buckets":["media"]}]}`))
	f.Add([]byte(`{"users":[{"accessKey":"rootadmin","secretKey":"0123456789abcdef","policy":"admin"}]}`))
	f.Add([]byte(`{"users":[],"extra":1}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		users, err := ParseUsers(data, "rootadmin")
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, u := range users {
			if seen[u.AccessKey] || u.AccessKey == "rootadmin" || len(u.AccessKey) < minAccessKey || len(u.SecretKey) < minSecretKey {
				t.Fatalf("accepted user %+v", u)
			}
			switch u.Policy {
			case PolicyReadWrite, PolicyReadOnly, PolicyWriteOnly, PolicyAdmin:
			default:
				t.Fatalf("accepted policy %q", u.Policy)
			}
			seen[u.AccessKey] = true
		}
	})
}
