// Package keysfile is the format of the master keys file that `strata
// server` reads for server-side encryption with managed keys (engine/kms)
// and that the operator writes for each tenant: defined once here, with
// nothing but the standard library, so both sides may import it.
package keysfile

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
)

// EnvVar names the keys file for `strata server`.
const EnvVar = "STRATA_KMS_KEYS_FILE"

// KeySize is the size of a master key in bytes (AES-256).
const KeySize = 32

// File is the keys file:
//
//	{"default": "tenant-key-2", "keys": {"tenant-key-1": "<base64>", "tenant-key-2": "<base64>"}}
//
// SSE-S3 and SSE-KMS requests without a key ID use the default key.
type File struct {
	Default string            `json:"default"`
	Keys    map[string]string `json:"keys"`
}

// Parse decodes and checks a keys file.
func Parse(data []byte) (map[string][]byte, string, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, "", fmt.Errorf("keys file: %w", err)
	}
	keys := make(map[string][]byte, len(f.Keys))
	for id, enc := range f.Keys {
		k, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(k) != KeySize {
			return nil, "", fmt.Errorf("keys file: key %q is not %d base64-encoded bytes", id, KeySize)
		}
		keys[id] = k
	}
	if len(keys) == 0 {
		return nil, "", fmt.Errorf("keys file: no keys")
	}
	if f.Default == "" && len(keys) == 1 {
		for id := range keys {
			f.Default = id
		}
	}
	if _, ok := keys[f.Default]; !ok {
		return nil, "", fmt.Errorf("keys file: default key %q is not among the keys", f.Default)
	}
	return keys, f.Default, nil
}
