package crd_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/strata-storage/strata/test/testenv"
)

// These specs install the generated CRDs into a real kube-apiserver and check
// what a user applying manifests would see: samples accepted, defaults filled
// in, invalid specs refused with a message that says what to change.
func TestCRDs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CRD validation suite")
}

var (
	env *envtest.Environment
	k8s client.Client
	ctx = context.Background()
)

var _ = BeforeSuite(func() {
	var err error
	env, k8s, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// newNamespace creates a namespace for one spec, so specs never share objects.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}
