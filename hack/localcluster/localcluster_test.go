package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/utils/ptr"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/images"
)

func TestClusterRecords(t *testing.T) {
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "store"}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
	}
	ep := func(ip, host string, ready *bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
		if host != "" {
			e.Hostname = ptr.To(host)
		}
		return e
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "media-hl-x", Namespace: "store", Labels: map[string]string{discoveryv1.LabelServiceName: "media-hl"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			ep("10.244.1.2", "media-nvme-0", ptr.To(true)),
			ep("10.244.2.2", "media-nvme-1", nil), // no condition: ready
			ep("10.244.3.2", "media-nvme-2", ptr.To(false)),
		},
	}
	got := clusterRecords([]*corev1.Service{svc("media", "10.0.0.9"), svc("media-hl", corev1.ClusterIPNone), svc("pending", "")}, []*discoveryv1.EndpointSlice{slice})
	// FQDNs, and the short names the pods' DNS search path resolves.
	want := strings.Join([]string{
		"10.244.1.2\tmedia-hl.store",
		"10.244.2.2\tmedia-hl.store",
		"10.244.1.2\tmedia-hl.store.svc",
		"10.244.2.2\tmedia-hl.store.svc",
		"10.244.1.2\tmedia-hl.store.svc.cluster.local",
		"10.244.2.2\tmedia-hl.store.svc.cluster.local",
		"10.244.1.2\tmedia-nvme-0.media-hl.store.svc.cluster.local",
		"10.244.2.2\tmedia-nvme-1.media-hl.store.svc.cluster.local",
		"10.0.0.9\tmedia.store",
		"10.0.0.9\tmedia.store.svc",
		"10.0.0.9\tmedia.store.svc.cluster.local",
	}, "\n") + "\n"
	if got != want {
		t.Fatalf("records:\n%s\nwant:\n%s", got, want)
	}
}

func TestPodHosts(t *testing.T) {
	h := podHosts("10.244.1.2", "media-nvme-0", "media-hl", "store", "10.0.0.9\tmedia.store.svc.cluster.local\n")
	for _, line := range []string{
		"127.0.0.1\tlocalhost",
		"10.244.1.2\tmedia-nvme-0.media-hl.store.svc.cluster.local media-nvme-0",
		"10.0.0.9\tmedia.store.svc.cluster.local",
	} {
		if !strings.Contains(h, line+"\n") {
			t.Errorf("hosts lacks %q:\n%s", line, h)
		}
	}
	if h := podHosts("10.244.1.3", "web", "", "store", ""); !strings.Contains(h, "10.244.1.3\tweb\n") {
		t.Errorf("a pod without subdomain is named by its host name only:\n%s", h)
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"POD": "media-0", "PORT": "9000"}
	for in, want := range map[string]string{
		"--address=$(POD):$(PORT)": "--address=media-0:9000",
		"$(UNKNOWN)":               "$(UNKNOWN)",
		"$$(POD)":                  "$(POD)",
		"plain":                    "plain",
	} {
		if got := expand(in, env); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

// Pods run the images of the OCI layouts: found by their reference, not by
// other tags or images, unpacked once, entrypoint and cmd combined with the
// container's command and args as a runtime does, the image's environment
// under the container's.
func TestImageStore(t *testing.T) {
	// Unpacking keeps the image's owners (chown): root only. A developer's
	// machine skips; CI (.ci/run sets STRATA_CI, runs as root) must run it.
	if os.Getuid() != 0 {
		if os.Getenv("STRATA_CI") != "" {
			t.Fatal("unpacking keeps owners: needs root, and STRATA_CI is set")
		}
		t.Skip("unpacking keeps owners: needs root")
	}
	layouts, state := t.TempDir(), t.TempDir()
	bin := filepath.Join(t.TempDir(), "strata")
	if err := os.WriteFile(bin, []byte("engine"), 0o755); err != nil {
		t.Fatal(err)
	}
	spec, _ := images.SpecNamed("strata")
	b := images.Build{Version: "7.7.7", Revision: "r", Created: time.Unix(0, 0)}
	img, err := spec.Image(b, bin)
	if err != nil {
		t.Fatal(err)
	}
	p, err := layout.Write(filepath.Join(layouts, "strata"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{images.RefAnnotation: spec.Ref(b)})); err != nil {
		t.Fatal(err)
	}
	store, err := newImageStore(layouts, state)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.resolve(spec.Ref(b))
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(got.rootfs, "strata")); err != nil || string(data) != "engine" || got.uid != 65532 {
		t.Fatalf("unpacked /strata %q %v, uid %d", data, err, got.uid)
	}
	if _, err := store.resolve(spec.Repository + ":0.0.1"); err == nil || !strings.Contains(err.Error(), spec.Ref(b)) {
		t.Errorf("another tag must fail naming the images there are: %v", err)
	}
	id := func(s string) string { return s }
	for _, tc := range []struct {
		c    corev1.Container
		want []string
	}{
		{corev1.Container{}, []string{"/strata"}},
		{corev1.Container{Args: []string{"server", "x"}}, []string{"/strata", "server", "x"}},
		{corev1.Container{Command: []string{"/other"}}, []string{"/other"}},
		{corev1.Container{Command: []string{"/other"}, Args: []string{"a"}}, []string{"/other", "a"}},
	} {
		if argv := got.argv(&tc.c, id); !slices.Equal(argv, tc.want) {
			t.Errorf("%+v: argv %v, want %v", tc.c, argv, tc.want)
		}
	}
	env := withImageEnv([]string{"PATH=/bin", "A=image"}, []string{"A=pod", "B=pod"})
	if !slices.Equal(env, []string{"PATH=/bin", "A=pod", "B=pod"}) {
		t.Errorf("env %v", env)
	}
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := linkTree(got.rootfs, root); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, "home/nonroot"))
	if err != nil || st.Sys().(*syscall.Stat_t).Uid != 65532 {
		t.Fatalf("home/nonroot: %v", err)
	}
}

func TestKeyFiles(t *testing.T) {
	data := map[string][]byte{"accessKey": []byte("a"), "secretKey": []byte("s")}
	all, err := keyFiles(data, nil, ptr.To[int32](0o440), false, "secret x")
	if err != nil || len(all) != 2 || all["accessKey"].mode != 0o440 {
		t.Fatalf("all keys: %v %v", all, err)
	}
	items, err := keyFiles(data, []corev1.KeyToPath{{Key: "secretKey", Path: "dir/key", Mode: ptr.To[int32](0o400)}}, nil, false, "secret x")
	if err != nil || len(items) != 1 || string(items["dir/key"].data) != "s" || items["dir/key"].mode != 0o400 {
		t.Fatalf("items: %v %v", items, err)
	}
	if _, err := keyFiles(data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, false, "secret x"); err == nil {
		t.Fatal("a missing key of a required source is an error")
	}
	if got, err := keyFiles(data, []corev1.KeyToPath{{Key: "missing", Path: "m"}}, nil, true, "secret x"); err != nil || len(got) != 0 {
		t.Fatalf("optional: %v %v", got, err)
	}
}

func TestWriteProjection(t *testing.T) {
	dir := t.TempDir()
	files := map[string]projectedFile{"topology.json": {data: []byte(`{"version":1}`), mode: 0o644}, "a/b": {data: []byte("x"), mode: 0o600}}
	if err := writeProjection(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	if b, err := os.ReadFile(filepath.Join(dir, "topology.json")); err != nil || string(b) != `{"version":1}` {
		t.Fatalf("read through the key symlink: %q %v", b, err)
	}
	// Unchanged content: no new payload directory.
	if err := writeProjection(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, "..data")); again != first {
		t.Fatalf("rewrote unchanged content: %s -> %s", first, again)
	}
	// An update swaps ..data, drops the old payload and the removed key.
	if err := writeProjection(dir, map[string]projectedFile{"topology.json": {data: []byte(`{"version":2}`), mode: 0o644}}, -1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "topology.json")); string(b) != `{"version":2}` {
		t.Fatalf("after update: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, first)); !os.IsNotExist(err) {
		t.Errorf("old payload %s kept: %v", first, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("removed key still linked: %v", err)
	}
}

// A subPath names a file of the volume (a Secret key, through the
// projection's symlink) or a directory, made when missing; never a path
// out of the volume.
func TestSubPathSource(t *testing.T) {
	vol := t.TempDir()
	if err := writeProjection(vol, map[string]projectedFile{"web-config.yaml": {data: []byte("tls_server_config: {}"), mode: 0o644}}, -1); err != nil {
		t.Fatal(err)
	}
	src, err := subPathSource(vol, "web-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(src); err != nil || st.IsDir() {
		t.Fatalf("a Secret key's subPath: %v %v", st, err)
	}
	src, err = subPathSource(vol, "data/prometheus")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		t.Fatalf("a missing subPath becomes a directory: %v", err)
	}
	for _, bad := range []string{"/etc", "../other", "a/../../b"} {
		if _, err := subPathSource(vol, bad); err == nil {
			t.Errorf("subPath %q accepted", bad)
		}
	}
}

func TestTokenRenewal(t *testing.T) {
	issued := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	for life, want := range map[time.Duration]time.Duration{
		3607 * time.Second: 2885600 * time.Millisecond, // kube-api-access: 80% of an hour and 7 s
		10 * time.Minute:   8 * time.Minute,
		48 * time.Hour:     24 * time.Hour, // renewed daily however long it lives
	} {
		if got := tokenRenewal(issued, issued.Add(life)); got.Sub(issued) != want {
			t.Errorf("a token living %s renewed after %s, want %s", life, got.Sub(issued), want)
		}
	}
}

func TestWriteInPlaceNeverShrinks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte("127.0.0.1 localhost\n10.0.0.9 media\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(p)
	if err := writeInPlace(p, []byte("127.0.0.1 localhost\n")); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(p)
	b, _ := os.ReadFile(p)
	if after.Size() < before.Size() || strings.TrimRight(string(b), "\n") != "127.0.0.1 localhost" {
		t.Fatalf("size %d -> %d, content %q", before.Size(), after.Size(), b)
	}
}

func TestContainerUser(t *testing.T) {
	img := image{uid: 65532, gid: 65532}
	pod := &corev1.Pod{Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](2000), SupplementalGroups: []int64{3000},
	}}}
	c := &corev1.Container{Name: "strata"}
	uid, gid, groups, err := containerUser(pod, c, img)
	if err != nil || uid != 65532 || gid != 65532 || len(groups) != 2 || groups[0] != 2000 {
		t.Fatalf("image user: %d %d %v %v", uid, gid, groups, err)
	}
	c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](0)}
	if _, _, _, err := containerUser(pod, c, img); err == nil {
		t.Fatal("runAsNonRoot with uid 0 must be refused")
	}
}

func TestPodField(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", Labels: map[string]string{"app": "x"}},
		Status:     corev1.PodStatus{PodIP: "10.244.1.2", PodIPs: []corev1.PodIP{{IP: "10.244.1.2"}}},
	}
	for field, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "n", "status.podIP": "10.244.1.2",
		"status.podIPs": "10.244.1.2", "metadata.labels['app']": "x",
	} {
		if got, err := podField(pod, field); err != nil || got != want {
			t.Errorf("%s = %q, %v; want %q", field, got, err, want)
		}
	}
	if _, err := podField(pod, "spec.nope"); err == nil {
		t.Error("an unknown field is an error")
	}
}

func TestIPAM(t *testing.T) {
	a := newIPAM()
	ip1, _ := a.allocate(2, "u1")
	ip2, _ := a.allocate(2, "u2")
	again, _ := a.allocate(2, "u1")
	if ip1 != "10.244.2.2" || ip2 != "10.244.2.3" || again != ip1 {
		t.Fatalf("got %s %s %s", ip1, ip2, again)
	}
	a.release("u1")
	if ip3, _ := a.allocate(2, "u3"); ip3 != ip1 {
		t.Fatalf("released address not reused: %s", ip3)
	}
}

// The demo manifests decode strictly into the API types: a field renamed in
// the API breaks this test, not `make demo`.
func TestDemoManifests(t *testing.T) {
	objs, err := readManifests([]string{"demo"})
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := storagev1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme, serializer.EnableStrict)
	kinds := map[string]bool{}
	for _, u := range objs {
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := codecs.UniversalDeserializer().Decode(data, nil, nil); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		kinds[u.GetKind()] = true
	}
	if !kinds["Tenant"] || !kinds["ServerPool"] {
		t.Fatalf("demo has kinds %v, want a Tenant and a ServerPool", kinds)
	}
}

func TestMentionsDir(t *testing.T) {
	for text, want := range map[string]bool{
		"/tmp/lc":                       true,
		"/tmp/lc/pods/x":                true,
		"run\x00--state-dir\x00/tmp/lc": true,
		"--data-dir=/tmp/lc/tmp/etcd":   true,
		"/tmp/lc2":                      false,
		"/tmp/lc2 /tmp/lc-other":        false,
		"/tmp/lc2 /tmp/lc":              true,
	} {
		if got := mentionsDir(text, "/tmp/lc"); got != want {
			t.Errorf("mentionsDir(%q) = %v, want %v", text, got, want)
		}
	}
}
