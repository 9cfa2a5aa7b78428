package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func doc(rules string) []byte {
	return []byte(`<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + rules + `</LifecycleConfiguration>`)
}

func TestParseRefusesWhatS3Refuses(t *testing.T) {
	for _, c := range []struct {
		name, rules, code string
	}{
		{"no rules", ``, "MalformedXML"},
		{"not XML", `<Rule>`, "MalformedXML"},
		{"status lower case", `<Rule><ID>a</ID><Prefix>p</Prefix><Status>enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		{"id too long", `<Rule><ID>` + strings.Repeat("a", 256) + `</ID><Prefix/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "InvalidArgument"},
		{"same id", strings.Repeat(`<Rule><ID>a</ID><Prefix/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, 2), "InvalidArgument"},
		{"zero days", `<Rule><Prefix/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>`, "InvalidArgument"},
		{"date not midnight", `<Rule><Prefix/><Status>Enabled</Status><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration></Rule>`, "InvalidArgument"},
		{"date not a date", `<Rule><Prefix/><Status>Enabled</Status><Expiration><Date>20200101</Date></Expiration></Rule>`, "InvalidArgument"},
		{"days and date", `<Rule><Prefix/><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01</Date></Expiration></Rule>`, "MalformedXML"},
		{"no action", `<Rule><Prefix/><Status>Enabled</Status></Rule>`, "InvalidRequest"},
		{"filter and prefix", `<Rule><Prefix/><Filter/><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		{"no filter", `<Rule><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		{"two filters", `<Rule><Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`, "MalformedXML"},
		{"marker with tags", `<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`, "InvalidArgument"},
		{"abort with tags", `<Rule><Filter><And><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`, "InvalidArgument"},
		{"noncurrent zero", `<Rule><Prefix/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>0</NoncurrentDays></NoncurrentVersionExpiration></Rule>`, "InvalidArgument"},
		{"transition", `<Rule><Prefix/><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>`, "InvalidStorageClass"},
		{"transition bad date", `<Rule><Prefix/><Status>Enabled</Status><Transition><Date>20220927</Date><StorageClass>GLACIER</StorageClass></Transition></Rule>`, "InvalidArgument"},
	} {
		_, err := Parse(doc(c.rules))
		var e *Error
		if !errors.As(err, &e) || e.Code != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
}

func TestParseKeepsTheDocumentAndNamesRules(t *testing.T) {
	c, err := Parse(doc(`<Rule><Prefix>logs/</Prefix><Status>Enabled</Status><Expiration><Days>31</Days></Expiration></Rule>` +
		`<Rule><ID>mp</ID><Filter></Filter><Status>Disabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules[0].ID) != 32 || c.Rules[1].ID != "mp" {
		t.Errorf("IDs %q %q: want a generated one and mp", c.Rules[0].ID, c.Rules[1].ID)
	}
	again, err := Parse(c.Marshal())
	if err != nil {
		t.Fatalf("the stored document does not parse: %v\n%s", err, c.Marshal())
	}
	out := string(again.Marshal())
	for _, want := range []string{"<Prefix>logs/</Prefix>", "<Filter></Filter>", "<Days>31</Days>", "<ID>mp</ID>"} {
		if !strings.Contains(out, want) {
			t.Errorf("given back without %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<Filter></Filter><Prefix") || strings.Count(out, "<Filter>") != 1 {
		t.Errorf("a legacy Prefix rule gained a Filter:\n%s", out)
	}
}

func mustParse(t *testing.T, rules string) *Configuration {
	t.Helper()
	c, err := Parse(doc(rules))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var t0 = time.Date(2026, 3, 10, 10, 30, 0, 0, time.UTC)

func TestExpiryRoundsUpToMidnightAndPicksTheEarliestRule(t *testing.T) {
	c := mustParse(t, `<Rule><ID>slow</ID><Prefix>a/</Prefix><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>`+
		`<Rule><ID>fast</ID><Filter><And><Prefix>a/</Prefix><Tag><Key>tmp</Key><Value>1</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`+
		`<Rule><ID>off</ID><Prefix>a/</Prefix><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>`)
	v := Version{ModTime: t0}
	at, id, ok := c.Expiry("a/x", v, Day)
	if !ok || id != "slow" || !at.Equal(time.Date(2026, 4, 10, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("untagged: %s %s %v, want slow at 2026-04-10 00:00", at, id, ok)
	}
	v.Tags = map[string]string{"tmp": "1"}
	if at, id, _ := c.Expiry("a/x", v, Day); id != "fast" || !at.Equal(time.Date(2026, 3, 12, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("tagged: %s %s, want fast at 2026-03-12 00:00", at, id)
	}
	if h := c.ExpirationHeader("a/x", v, Day); h != `expiry-date="Thu, 12 Mar 2026 00:00:00 GMT", rule-id="fast"` {
		t.Errorf("header %s", h)
	}
	if _, _, ok := c.Expiry("b/x", v, Day); ok {
		t.Error("a key outside every prefix expires")
	}
	if at, _, _ := c.Expiry("a/x", Version{ModTime: t0}, 10*time.Second); !at.Equal(t0.Add(300 * time.Second)) {
		t.Errorf("with 10 s days: %s, want 300 s after the write, not rounded", at)
	}
}

func TestDecide(t *testing.T) {
	const day = time.Second
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	obj := func(s int) Version { return Version{ModTime: at(s), Size: 10} }
	marker := func(s int) Version { return Version{ModTime: at(s), DeleteMarker: true} }
	locked := obj(3)
	locked.Locked = true
	for _, c := range []struct {
		name, rules string
		versions    []Version
		now         int
		want        []Action
	}{
		{"current expires after its days", `<Rule><ID>r</ID><Prefix/><Status>Enabled</Status><Expiration><Days>5</Days></Expiration></Rule>`,
			[]Version{obj(0)}, 5, []Action{{ExpireCurrent, 0, "r"}}},
		{"not yet", `<Rule><ID>r</ID><Prefix/><Status>Enabled</Status><Expiration><Days>5</Days></Expiration></Rule>`,
			[]Version{obj(0)}, 4, nil},
		{"size filter", `<Rule><ID>r</ID><Filter><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`,
			[]Version{obj(0)}, 9, nil},
		{"noncurrent counted from when it stopped being current", `<Rule><ID>n</ID><Prefix/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
			[]Version{obj(10), obj(5), obj(0)}, 9, []Action{{DeleteNoncurrent, 2, "n"}}},
		{"newer noncurrent kept", `<Rule><ID>n</ID><Prefix/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>2</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`,
			[]Version{obj(10), obj(8), obj(6), obj(4), obj(2)}, 100, []Action{{DeleteNoncurrent, 3, "n"}, {DeleteNoncurrent, 4, "n"}}},
		{"locked version kept", `<Rule><ID>n</ID><Prefix/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
			[]Version{obj(10), locked}, 100, nil},
		{"delete marker alone removed", `<Rule><ID>m</ID><Prefix/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`,
			[]Version{marker(1)}, 2, []Action{{RemoveDeleteMarker, 0, "m"}}},
		{"delete marker over a version kept", `<Rule><ID>m</ID><Prefix/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`,
			[]Version{marker(1), obj(0)}, 2, nil},
		{"marker removed once its versions go in the same pass", `<Rule><ID>m</ID><Prefix/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
			[]Version{marker(5), obj(0)}, 10, []Action{{DeleteNoncurrent, 1, "m"}, {RemoveDeleteMarker, 0, "m"}}},
		{"marker over a locked version kept", `<Rule><ID>m</ID><Prefix/><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
			[]Version{marker(5), locked}, 10, nil},
	} {
		got := mustParse(t, c.rules).Decide("k", c.versions, at(c.now), day)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func TestAbortUpload(t *testing.T) {
	c := mustParse(t, `<Rule><ID>mp</ID><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>2</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`)
	if _, ok := c.AbortUpload("up/a", t0, t0.Add(47*time.Hour), Day); ok {
		t.Error("aborted before its days")
	}
	if id, ok := c.AbortUpload("up/a", t0, time.Date(2026, 3, 13, 0, 0, 0, 0, time.UTC), Day); !ok || id != "mp" {
		t.Error("not aborted at the midnight after two days")
	}
	if _, ok := c.AbortUpload("other", t0, t0.Add(1000*time.Hour), Day); ok {
		t.Error("aborted outside its prefix")
	}
}
