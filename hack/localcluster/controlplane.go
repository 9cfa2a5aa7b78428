package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// serviceAccountIssuer is the issuer of the cluster's ServiceAccount
// tokens.
const serviceAccountIssuer = "https://kubernetes.default.svc." + clusterDomain

// controlPlane is envtest's kube-apiserver and etcd plus the two control
// loops envtest leaves out, kube-controller-manager and kube-scheduler.
type controlPlane struct {
	env      *envtest.Environment
	admin    *rest.Config
	apiURL   *url.URL
	certDir  string // the API server's: its CA (ca.crt) and certificates
	children []*process
}

// startControlPlane starts etcd and kube-apiserver with the CRDs installed,
// then the controller manager and scheduler with an admin kubeconfig.
func startControlPlane(ctx context.Context, c *runConfig) (*controlPlane, error) {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(c.Repo, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: c.Assets,
	}
	if c.Monitoring {
		// Installed before the operator starts, which watches the
		// ServiceMonitors and PrometheusRules it owns only when their
		// kinds exist then.
		env.CRDDirectoryPaths = append(env.CRDDirectoryPaths, monitoringCRDDir(c.Images))
	}
	api := env.ControlPlane.GetAPIServer()
	// Our own serving certificate, valid for the names pods use.
	api.CertDir = filepath.Join(c.State, "kube", "apiserver")
	ca, err := writeAPIServerCerts(api.CertDir)
	if err != nil {
		return nil, fmt.Errorf("API server certificates: %w", err)
	}
	api.CA = ca
	// Pods get their service account token, the cluster CA and namespace
	// mounted (kube-api-access-*), as in a real cluster: the operator runs
	// in a pod when installed with Helm (docs/install.md).
	api.Configure().Disable("disable-admission-plugins")
	// envtest's defaults, said out loud: the service range the proxy serves.
	api.Configure().Set("service-cluster-ip-range", serviceCIDR)
	// The cluster namespace has no default route to guess an address from;
	// the bridge address is what the `kubernetes` Service's endpoints say.
	// Kubelets reach it on the node network; it reaches them with a client
	// certificate of the CA they trust.
	api.Address = nodeNetBridgeAddr
	api.Port = strconv.Itoa(apiServerPort)
	api.Configure().Set("advertise-address", nodeNetBridgeAddr)
	// ServiceAccount tokens name the API server by its in-cluster name, as
	// kubeadm's clusters do, so that a verifier in a pod (a tenant's STS,
	// docs/claims.md) finds the issuer's discovery and keys through the
	// `kubernetes` Service rather than at envtest's 127.0.0.1.
	api.Configure().Set("service-account-issuer", serviceAccountIssuer)
	api.Configure().Set("service-account-jwks-uri", serviceAccountIssuer+"/openid/v1/jwks")
	api.Configure().Set("kubelet-client-certificate", filepath.Join(api.CertDir, "kubelet-client.crt"))
	api.Configure().Set("kubelet-client-key", filepath.Join(api.CertDir, "kubelet-client.key"))
	api.Configure().Set("kubelet-preferred-address-types", "InternalIP,Hostname")
	// Each kubelet reads only its own pods' Secrets and may change only
	// its own Node.
	api.Configure().Set("authorization-mode", "Node,RBAC")
	api.Configure().Set("enable-admission-plugins", "NodeRestriction")
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cp := &controlPlane{env: env, admin: cfg, apiURL: api.SecureServing.URL("https", "/"), certDir: api.CertDir}

	adminKubeconfig := filepath.Join(c.State, "kube", "admin.kubeconfig")
	if err := writeKubeconfig(adminKubeconfig, cfg, cfg.Host); err != nil {
		cp.stop()
		return nil, err
	}
	kcm := newProcess("kube-controller-manager", filepath.Join(c.Assets, "kube-controller-manager"), []string{
		"--kubeconfig=" + adminKubeconfig,
		// Tokens need a signing key the cluster has no use for. The node
		// lifecycle controller marks a node whose kubelet stops renewing
		// its Lease Unknown, taints it and evicts its pods.
		"--controllers=*,-serviceaccount-token",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		"--cluster-name=localcluster",
		// Publishes kube-root-ca.crt in every namespace (the CA of
		// in-cluster clients).
		"--root-ca-file=" + filepath.Join(api.CertDir, "ca.crt"),
		"--node-monitor-grace-period=" + c.NodeGrace.String(),
		"--node-monitor-period=2s",
	}, c.logFile("kube-controller-manager.log"))
	sched := newProcess("kube-scheduler", filepath.Join(c.Assets, "kube-scheduler"), []string{
		"--kubeconfig=" + adminKubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
	}, c.logFile("kube-scheduler.log"))
	for _, p := range []*process{kcm, sched} {
		if err := p.start(nil); err != nil {
			cp.stop()
			return nil, err
		}
		cp.children = append(cp.children, p)
	}
	return cp, nil
}

// stop ends the control loops, then kube-apiserver and etcd (envtest removes
// their data and certificate directories).
func (cp *controlPlane) stop() {
	for i := len(cp.children) - 1; i >= 0; i-- {
		cp.children[i].stop(10 * time.Second)
	}
	if err := cp.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping kube-apiserver and etcd: %v\n", err)
	}
}

// addUser makes a client certificate user of the API server.
func (cp *controlPlane) addUser(name string, groups ...string) (*rest.Config, error) {
	u, err := cp.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, cp.admin)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	return u.Config(), nil
}

// writeKubeconfig writes cfg as a kubeconfig file pointing at server.
func writeKubeconfig(path string, cfg *rest.Config, server string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["localcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["localcluster"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["localcluster"] = &clientcmdapi.Context{Cluster: "localcluster", AuthInfo: "localcluster", Namespace: "default"}
	kc.CurrentContext = "localcluster"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// process is one child the harness runs and stops: control-plane parts,
// the operator. Each dies with the harness (SIGKILL on parent death).
type process struct {
	name string
	path string
	args []string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func newProcess(name, path string, args []string, log string) *process {
	return &process{name: name, path: path, args: args, log: log}
}

func (p *process) start(env []string) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.path, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.done = make(chan struct{})
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return nil
}

// exited is closed when the process has ended.
func (p *process) exited() <-chan struct{} { return p.done }

// stop sends SIGTERM and, after grace, SIGKILL.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil || p.done == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
