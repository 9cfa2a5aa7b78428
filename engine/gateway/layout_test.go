package gateway

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func noXattrs(string) error { return errors.New("xattrs are not supported on this filesystem") }
func xattrsOK(string) error { return nil }

func TestLayoutDetectsSidecarAndKeepsIt(t *testing.T) {
	root := t.TempDir()
	l, err := prepareLayout(root, MetadataAuto, noXattrs)
	if err != nil {
		t.Fatal(err)
	}
	if l.metadata != MetadataSidecar || !l.detected || l.why == "" {
		t.Fatalf("first start without xattrs: %+v", l)
	}
	if fi, err := os.Stat(filepath.Join(root, hiddenDir, sidecarDir)); err != nil || !fi.IsDir() {
		t.Fatalf("sidecar directory: %v", err)
	}
	// Later starts read the marker, even if xattrs now work.
	l2, err := prepareLayout(root, MetadataAuto, xattrsOK)
	if err != nil || l2.metadata != MetadataSidecar || l2.detected || l2.id != l.id {
		t.Fatalf("second start: %+v %v", l2, err)
	}
	if _, err := prepareLayout(root, MetadataXattr, xattrsOK); err == nil || !strings.Contains(err.Error(), "keeps its metadata as sidecar") {
		t.Fatalf("contradicting --metadata: %v", err)
	}
}

func TestLayoutModes(t *testing.T) {
	if _, err := prepareLayout(t.TempDir(), MetadataXattr, noXattrs); err == nil {
		t.Fatal("--metadata xattr on a filesystem without them started")
	}
	l, err := prepareLayout(t.TempDir(), MetadataSidecar, xattrsOK)
	if err != nil || l.metadata != MetadataSidecar {
		t.Fatalf("explicit sidecar: %+v %v", l, err)
	}
	l, err = prepareLayout(t.TempDir(), MetadataAuto, xattrsOK)
	if err != nil || l.metadata != MetadataXattr {
		t.Fatalf("auto with xattrs: %+v %v", l, err)
	}
	if _, err := prepareLayout(t.TempDir(), "nfs", xattrsOK); err == nil {
		t.Fatal("unknown mode accepted")
	}
	f := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(f, nil, 0o644)
	if _, err := prepareLayout(f, MetadataAuto, xattrsOK); err == nil {
		t.Fatal("a file as root accepted")
	}
}

func TestLayoutMarkerChecks(t *testing.T) {
	for content, want := range map[string]string{
		`{"format":"other","version":1,"metadata":"xattr"}`:          "not a strata gateway marker",
		`{"format":"strata-gateway","version":9,"metadata":"xattr"}`: "newer than this build",
		`{"format":"strata-gateway","version":1,"metadata":"nfs"}`:   "unknown metadata mode",
		`{`: "unexpected end",
	} {
		root := t.TempDir()
		_ = os.MkdirAll(filepath.Join(root, hiddenDir), 0o755)
		_ = os.WriteFile(filepath.Join(root, hiddenDir, markerFile), []byte(content), 0o644)
		if _, err := prepareLayout(root, MetadataAuto, xattrsOK); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("marker %s: %v, want %q", content, err, want)
		}
	}
}

// TestLayoutReplicasStartingTogether: replicas starting at once on a fresh
// volume agree on one marker.
func TestLayoutReplicasStartingTogether(t *testing.T) {
	root := t.TempDir()
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			probe := xattrsOK
			if i%2 == 1 {
				probe = noXattrs // detection may differ; the marker decides
			}
			l, err := prepareLayout(root, MetadataAuto, probe)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = l.id + string(l.metadata)
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("replicas disagree: %v", ids)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(root, hiddenDir))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("leftover %s", e.Name())
		}
	}
}

func TestBackendPath(t *testing.T) {
	l := &layout{root: "/data"}
	for dir, want := range map[string]string{
		"/data/.strata/versions": "/proc/self/cwd/.strata/versions",
		"/elsewhere/versions":    "/elsewhere/versions",
		"/data2/versions":        "/data2/versions",
	} {
		if got := l.backendPath(dir); got != want {
			t.Errorf("backendPath(%s) = %s, want %s", dir, got, want)
		}
	}
}
