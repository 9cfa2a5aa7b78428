package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// The node network of the kubelet nodes: a bridge in the cluster namespace
// with the control plane's address, each node's eth0 on it, each node's pods
// on a bridge of the node's own behind it (docs/localcluster.md).
const (
	nodeNetBridgeAddr = "10.240.0.1" // API server, CoreDNS, registry
	nodeNetPrefixLen  = 24
	apiServerPort     = 6443
	kubeletPort       = 10250
	registryPort      = 5000
	clusterDNSIP      = "10.0.0.10" // kube-system/kube-dns
	pauseImage        = "registry.k8s.io/pause:3.10"
	cniBinDir         = "/usr/lib/cni" // Debian's containernetworking-plugins
)

// mirroredRegistries are the registries whose images the nodes pull from
// the harness's registry instead: every image a local-cluster pod names.
var mirroredRegistries = []string{"ghcr.io", "quay.io", "registry.k8s.io", "docker.io"}

// kubeletNodeIP is node n's address on the node network (1-based).
func kubeletNodeIP(n int) string { return fmt.Sprintf("10.240.0.%d", 10+n) }

// nodePodCIDR is the pod range of node n: its CNI bridge takes .1.
func nodePodCIDR(n int) string { return fmt.Sprintf("%s.%d.0/24", podCIDRPrefix, n) }

// nodeDirs are the places of one node under the state directory. The node's
// mount namespace puts VarLib on /var/lib and Logs on /var/log, so the
// kubelet, containerd and the CNI plugins keep their usual paths; the rest
// is named in their configuration.
type nodeDirs struct {
	Root    string // <state>/nodes/node-n
	VarLib  string
	Logs    string
	CNI     string // the CNI configuration containerd reads
	CertsD  string // containerd's registry hosts
	Opt     string
	Plugins string // the kubelet's volume plugin directory
}

func dirsOf(state string, n int) nodeDirs {
	root := filepath.Join(state, "nodes", nodeName(n))
	return nodeDirs{
		Root: root, VarLib: filepath.Join(root, "var-lib"), Logs: filepath.Join(state, "logs", nodeName(n)),
		CNI: filepath.Join(root, "cni"), CertsD: filepath.Join(root, "certs.d"), Opt: filepath.Join(root, "opt"),
		Plugins: filepath.Join(root, "volume-plugins"),
	}
}

func (d nodeDirs) file(name string) string { return filepath.Join(d.Root, name) }

// nodeSpec is what one node's configuration files are rendered from.
type nodeSpec struct {
	N          int
	Dirs       nodeDirs
	CgroupRoot string // the kubelet's cgroupRoot: the node's pods go below it
	CAFile     string // signs the API server's client certificate towards kubelets
	Nodes      int
}

// containerdConfig is containerd's config.toml (version 2, containerd 1.6).
func (s nodeSpec) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # root here lacks CAP_SYS_RESOURCE: no container may lower its OOM score
  restrict_oom_score_adj = true
  # exec, attach and port-forward: the kubelet reaches it inside the node
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, s.Dirs.Opt, pauseImage, cniBinDir, s.Dirs.CNI, s.Dirs.CertsD)
}

// registryHosts is containerd's hosts.toml of each mirrored registry: pull
// from the harness's registry, with no fallback upstream.
func registryHosts() string {
	mirror := fmt.Sprintf("http://%s:%d", nodeNetBridgeAddr, registryPort)
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", mirror, mirror)
}

// cniConfig is the node's CNI network: a bridge with the node's pod range,
// the node its gateway; the other nodes' ranges are routed (no overlay, no
// masquerade).
func (s nodeSpec) cniConfig() ([]byte, error) {
	gw := fmt.Sprintf("%s.%d.1", podCIDRPrefix, s.N)
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "localcluster",
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
			// A pod reaches itself through its own Service.
			"hairpinMode": true,
			"ipam": map[string]any{
				"type":   "host-local",
				"ranges": [][]map[string]string{{{"subnet": nodePodCIDR(s.N), "gateway": gw}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// kubeletConfig is the node's KubeletConfiguration.
func (s nodeSpec) kubeletConfig() ([]byte, error) {
	cfg := kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{APIVersion: "kubelet.config.k8s.io/v1beta1", Kind: "KubeletConfiguration"},
		// This machine's cgroups are v1; Kubernetes 1.36 still runs there
		// when asked.
		FailCgroupV1: ptr.To(false),
		// containerd 1.6 has no RuntimeConfig call to say which driver
		// it uses.
		CgroupDriver:             "cgroupfs",
		CgroupRoot:               s.CgroupRoot,
		ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		Address:                  "0.0.0.0",
		Port:                     kubeletPort,
		ReadOnlyPort:             0,
		HealthzBindAddress:       "127.0.0.1",
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(true)},
			X509:      kubeletv1beta1.KubeletX509Authentication{ClientCAFile: s.CAFile},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
		ClusterDNS:    []string{clusterDNSIP},
		ClusterDomain: clusterDomain,
		// No host search domains or resolvers in pods: the cluster DNS
		// answers everything they may look up.
		ResolverConfig: ptr.To(s.Dirs.file("resolv.conf")),
		// Every node is this machine: its disk is shared with whatever else
		// runs here, so only a disk that is really full evicts.
		EvictionHard: map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		ImageGCHighThresholdPercent: ptr.To[int32](95),
		ImageGCLowThresholdPercent:  ptr.To[int32](90),
		// How often each pod is synced, which is when changed Secrets
		// and ConfigMaps reach its volumes: Kubernetes' 1 min, a twelfth
		// of it here so that certificate rotations and topology changes
		// take seconds, not minutes, in the tests (behaviour is the same;
		// the pods of one change still get it seconds apart).
		SyncFrequency:             metav1.Duration{Duration: 5 * time.Second},
		NodeLeaseDurationSeconds:  20,
		NodeStatusUpdateFrequency: metav1.Duration{Duration: 10 * time.Second},
		// Restarts a crashed container within two seconds at most, near
		// what a node of a busy cluster does after the first crash.
		CrashLoopBackOff: kubeletv1beta1.CrashLoopBackOffConfig{MaxContainerRestartPeriod: &metav1.Duration{Duration: 2 * time.Second}},
		FeatureGates:     map[string]bool{"KubeletCrashLoopBackOffMax": true},
		VolumePluginDir:  s.Dirs.Plugins,
		FailSwapOn:       ptr.To(false),
		// The kubelet sets the kernel's panic and overcommit sysctls
		// (host-wide); the harness restores them when the cluster stops.
		ProtectKernelDefaults: false,
		// Lowering an OOM score needs CAP_SYS_RESOURCE, which root lacks
		// here.
		OOMScoreAdj: ptr.To[int32](0),
		// Pods of a node are pulled in parallel (one registry, local).
		SerializeImagePulls: ptr.To(false),
		KubeAPIQPS:          ptr.To[int32](50),
		KubeAPIBurst:        100,
		ShutdownGracePeriod: metav1.Duration{},
	}
	return yaml.Marshal(&cfg)
}

// kubeletFlags are what the configuration file cannot say.
func (s nodeSpec) kubeletFlags(kubelet string) []string {
	return []string{
		kubelet,
		"--config=" + s.Dirs.file("kubelet.yaml"),
		"--kubeconfig=" + s.Dirs.file("kubelet.kubeconfig"),
		"--hostname-override=" + nodeName(s.N),
		"--node-ip=" + kubeletNodeIP(s.N),
		"--node-labels=" + strings.Join([]string{
			"topology.kubernetes.io/zone=" + zoneOf(s.N),
			"topology.kubernetes.io/region=local",
			labelStorageRole + "=true",
		}, ","),
		"--v=1",
	}
}

// kubeProxyConfig is the node's KubeProxyConfiguration: iptables mode,
// conntrack sysctls left alone (they are host-wide).
func (s nodeSpec) kubeProxyConfig() ([]byte, error) {
	zero := &metav1.Duration{}
	cfg := kubeproxyv1alpha1.KubeProxyConfiguration{
		TypeMeta:           metav1.TypeMeta{APIVersion: "kubeproxy.config.k8s.io/v1alpha1", Kind: "KubeProxyConfiguration"},
		HostnameOverride:   nodeName(s.N),
		BindAddress:        kubeletNodeIP(s.N),
		HealthzBindAddress: "127.0.0.1:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		Mode:               "iptables",
		ClusterCIDR:        podCIDRPrefix + ".0.0/16",
		DetectLocalMode:    "ClusterCIDR",
		OOMScoreAdj:        ptr.To[int32](0),
		Conntrack: kubeproxyv1alpha1.KubeProxyConntrackConfiguration{
			MaxPerCore: ptr.To[int32](0), Min: ptr.To[int32](0),
			TCPEstablishedTimeout: zero, TCPCloseWaitTimeout: zero,
		},
	}
	cfg.ClientConnection.Kubeconfig = s.Dirs.file("kube-proxy.kubeconfig")
	return yaml.Marshal(&cfg)
}

// writeNodeFiles writes a node's directories and configuration files.
func writeNodeFiles(s nodeSpec) error {
	for _, d := range []string{s.Dirs.VarLib, s.Dirs.Logs, s.Dirs.CNI, s.Dirs.Opt, s.Dirs.Plugins} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	kubelet, err := s.kubeletConfig()
	if err != nil {
		return err
	}
	proxy, err := s.kubeProxyConfig()
	if err != nil {
		return err
	}
	cni, err := s.cniConfig()
	if err != nil {
		return err
	}
	files := map[string][]byte{
		s.Dirs.file("containerd.toml"):                        []byte(s.containerdConfig()),
		s.Dirs.file("kubelet.yaml"):                           kubelet,
		s.Dirs.file("kube-proxy.yaml"):                        proxy,
		s.Dirs.file("resolv.conf"):                            []byte("# pods of this node use the cluster DNS only\n"),
		filepath.Join(s.Dirs.CNI, "10-localcluster.conflist"): cni,
	}
	for _, reg := range mirroredRegistries {
		files[filepath.Join(s.Dirs.CertsD, reg, "hosts.toml")] = []byte(registryHosts())
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
