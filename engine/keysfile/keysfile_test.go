package keysfile

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	k := base64.StdEncoding.EncodeToString(make([]byte, KeySize))
	keys, def, err := Parse([]byte(`{"keys": {"only": "` + k + `"}}`))
	if err != nil || def != "only" || len(keys["only"]) != KeySize {
		t.Fatalf("one key, no default: %v %q %v", keys, def, err)
	}
	for doc, want := range map[string]string{
		`{"keys": {}}`: "no keys",
		`{"default": "b", "keys": {"a": "` + k + `"}}`: `default key "b"`,
		`{"keys": {"a": "c2hvcnQ="}}`:                  `key "a" is not 32`,
		`{"keys": {"a": "` + k + `"}, "extra": 1}`:     "unknown field",
	} {
		if _, _, err := Parse([]byte(doc)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", doc, err, want)
		}
	}
}
