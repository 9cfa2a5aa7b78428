package drive

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func validFormat() Format {
	return Format{
		DeploymentID: uuid.MustParse("5c1f3f0e-9d4b-4e55-8a0c-3e4f6b7a8c9d"),
		DriveID:      uuid.MustParse("0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"),
		Pool:         1, Set: 2, Index: 3, Sets: 4, SetSize: 8, Parity: 4,
	}
}

func TestFormatRoundTrip(t *testing.T) {
	f := validFormat()
	data, err := EncodeFormat(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeFormat(data)
	if err != nil {
		t.Fatal(err)
	}
	if got != f {
		t.Fatalf("round trip: got %+v, want %+v", got, f)
	}
}

func TestDecodeFormatRefuses(t *testing.T) {
	good, _ := EncodeFormat(validFormat())
	cases := map[string]struct {
		data string
		want string
	}{
		"not json":        {"\x00\x01", "not valid JSON"},
		"other magic":     {strings.Replace(string(good), FormatMagic, "minio", 1), "not a strata drive format file"},
		"newer format":    {strings.Replace(string(good), `"minReadVersion": 2`, `"minReadVersion": 7`, 1), "formatted by a newer strata"},
		"ancient format":  {strings.Replace(string(good), `"version": 2`, `"version": 1`, 1), "older than this build reads"},
		"index past set":  {strings.Replace(string(good), `"index": 3`, `"index": 9`, 1), "index 9 outside a set of 8"},
		"set past sets":   {strings.Replace(string(good), `"set": 2`, `"set": 4`, 1), "set 4 outside the pool's 4 sets"},
		"empty drive ID":  {strings.Replace(string(good), "0f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a", "00000000-0000-0000-0000-000000000000", 1), "empty drive ID"},
		"set size of one": {strings.Replace(string(good), `"setSize": 8`, `"setSize": 1`, 1), "set size 1 outside"},
		"parity too high": {strings.Replace(string(good), `"parity": 4`, `"parity": 5`, 1), "parity 5 outside 1..4"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeFormat([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("DecodeFormat error = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func FuzzDecodeFormat(f *testing.F) {
	good, _ := EncodeFormat(validFormat())
	f.Add(good)
	f.Add([]byte(`{"magic":"strata-drive","version":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := DecodeFormat(data)
		if err != nil {
			return
		}
		// Whatever decodes must be valid and encode back to the same format.
		again, err := EncodeFormat(got)
		if err != nil {
			t.Fatalf("decoded format does not re-encode: %v", err)
		}
		if back, err := DecodeFormat(again); err != nil || back != got {
			t.Fatalf("re-decode: %+v, %v; want %+v", back, err, got)
		}
	})
}
