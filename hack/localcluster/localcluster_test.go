package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/images"
)

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

// A node's configuration files parse as their programs read them (strictly:
// a misspelt field fails here, not in a kubelet's log), and say what the
// node needs: its own cgroup root, the harness's CA, the cluster DNS, the
// registry mirror and the pod range.
func TestNodeFiles(t *testing.T) {
	state := t.TempDir()
	s := nodeSpec{N: 3, Dirs: dirsOf(state, 3), Nodes: 4, CgroupRoot: "/localcluster-x/node-3/pods", CAFile: "/ca.crt"}
	if err := writeNodeFiles(s); err != nil {
		t.Fatal(err)
	}
	read := func(path string) []byte {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(read(s.Dirs.file("kubelet.yaml")), &kc); err != nil {
		t.Fatalf("kubelet.yaml: %v", err)
	}
	if kc.CgroupRoot != s.CgroupRoot || kc.CgroupDriver != "cgroupfs" || kc.FailCgroupV1 == nil || *kc.FailCgroupV1 ||
		kc.Authentication.X509.ClientCAFile != "/ca.crt" || len(kc.ClusterDNS) != 1 || kc.ClusterDNS[0] != clusterDNSIP ||
		kc.EvictionHard["nodefs.available"] != "1%" || kc.VolumePluginDir != s.Dirs.Plugins {
		t.Errorf("kubelet.yaml: %+v", kc)
	}
	var kp kubeproxyv1alpha1.KubeProxyConfiguration
	if err := yaml.UnmarshalStrict(read(s.Dirs.file("kube-proxy.yaml")), &kp); err != nil {
		t.Fatalf("kube-proxy.yaml: %v", err)
	}
	if kp.HostnameOverride != "node-3" || kp.Mode != "iptables" || kp.ClientConnection.Kubeconfig != s.Dirs.file("kube-proxy.kubeconfig") ||
		kp.Conntrack.MaxPerCore == nil || *kp.Conntrack.MaxPerCore != 0 {
		t.Errorf("kube-proxy.yaml: %+v", kp)
	}
	var cd map[string]any
	if _, err := toml.Decode(string(read(s.Dirs.file("containerd.toml"))), &cd); err != nil {
		t.Fatalf("containerd.toml: %v", err)
	}
	cri := cd["plugins"].(map[string]any)["io.containerd.grpc.v1.cri"].(map[string]any)
	if cri["sandbox_image"] != pauseImage || cri["restrict_oom_score_adj"] != true ||
		cri["registry"].(map[string]any)["config_path"] != s.Dirs.CertsD ||
		cri["cni"].(map[string]any)["conf_dir"] != s.Dirs.CNI {
		t.Errorf("containerd.toml CRI section: %v", cri)
	}
	for _, reg := range mirroredRegistries {
		var hosts map[string]any
		if _, err := toml.Decode(string(read(filepath.Join(s.Dirs.CertsD, reg, "hosts.toml"))), &hosts); err != nil {
			t.Fatalf("%s hosts.toml: %v", reg, err)
		}
		if hosts["server"] != "http://10.240.0.1:5000" {
			t.Errorf("%s mirrored to %v", reg, hosts["server"])
		}
	}
	var cni struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet, Gateway string }
			}
		}
	}
	if err := json.Unmarshal(read(filepath.Join(s.Dirs.CNI, "10-localcluster.conflist")), &cni); err != nil {
		t.Fatal(err)
	}
	if len(cni.Plugins) != 1 || cni.Plugins[0].Type != "bridge" || cni.Plugins[0].IPAM.Ranges[0][0].Subnet != "10.244.3.0/24" {
		t.Errorf("CNI: %+v", cni)
	}
	flags := strings.Join(s.kubeletFlags("kubelet"), " ")
	for _, want := range []string{"--node-ip=10.240.0.13", "--hostname-override=node-3", "topology.kubernetes.io/zone=zone-a", labelStorageRole + "=true"} {
		if !strings.Contains(flags, want) {
			t.Errorf("kubelet flags %q lack %q", flags, want)
		}
	}
}

// The cgroup hierarchies are found in mountinfo; a cluster's nodes have a
// cgroup parent of their own.
func TestCgroups(t *testing.T) {
	mounts, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	if len(mounts) == 0 {
		// A machine without cgroups cannot run the local cluster at all;
		// CI (STRATA_CI, .ci/run) must have them.
		if os.Getenv("STRATA_CI") != "" {
			t.Fatal("no cgroup hierarchy mounted, and STRATA_CI is set")
		}
		t.Skip("no cgroup hierarchy mounted")
	}
	for _, m := range mounts {
		if !strings.HasPrefix(m, "/sys/fs/cgroup") {
			t.Errorf("cgroup mount %s", m)
		}
	}
	if a, b := nodeCgroupParent("/tmp/a"), nodeCgroupParent("/tmp/b"); a == b || !strings.HasPrefix(a, "/localcluster-") {
		t.Errorf("cgroup parents %s %s", a, b)
	}
}
