// Package testenv starts a real kube-apiserver and etcd (envtest) with the
// Strata CRDs installed, for the integration suites under test/.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	storagev1alpha1 "github.com/strata-storage/strata/api/v1alpha1"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start runs envtest with the generated CRDs and returns the environment and
// a client whose scheme knows the Strata kinds. KUBEBUILDER_ASSETS must point
// at kube-apiserver and etcd (`make envtest` prints such a directory).
func Start() (*envtest.Environment, client.Client, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the suites with `make envtest-suites`, or export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	}
	if err := storagev1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, nil, err
	}
	env, err := NewEnvironment()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := env.Start()
	if err != nil {
		// Start may fail after launching etcd and kube-apiserver (a CRD the
		// API server refuses, say): stop them rather than leak them.
		_ = env.Stop()
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	return env, c, nil
}

// NewEnvironment is an envtest environment with the generated CRDs, not
// started: suites add webhooks or flags before calling Start (and Stop
// after a failed Start, which may leave etcd running).
func NewEnvironment() (*envtest.Environment, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the suites with `make envtest-suites`, or export KUBEBUILDER_ASSETS=$(hack/envtest.sh)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	// The API server listens on loopback only: it says so in what it
	// advertises (the keys URL of its ServiceAccount issuer's discovery
	// document among them), instead of the machine's own address.
	env.ControlPlane.GetAPIServer().Configure().Set("advertise-address", "127.0.0.1")
	return env, nil
}

// GVK returns the group/version/kind of a Strata kind.
func GVK(kind string) schema.GroupVersionKind {
	return storagev1alpha1.GroupVersion.WithKind(kind)
}

// AdminKubeconfig adds a system:masters user to a started environment and
// writes its kubeconfig into dir, for processes (the operator binary, Helm)
// that talk to the API server as a cluster admin would.
func AdminKubeconfig(env *envtest.Environment, name, dir string) (string, error) {
	user, err := env.ControlPlane.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := user.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}
