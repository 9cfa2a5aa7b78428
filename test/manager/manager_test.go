package manager_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/strata-storage/strata/test/testenv"
)

// The operator binary must start cleanly against a real API server: probes
// answer, it wins leader election, its metrics endpoint demands a token, and
// SIGTERM stops it promptly, handing the Lease back.
func TestManager(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Manager start-up suite")
}

const leaseName = "strata-operator.storage.strata.dev"

var (
	env        *envtest.Environment
	k8s        client.Client
	managerBin string
	kubeconfig string
)

var _ = BeforeSuite(func() {
	var err error
	env, k8s, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())

	managerBin = os.Getenv("MANAGER_BIN")
	if managerBin == "" {
		managerBin, err = gexec.Build("github.com/strata-storage/strata")
		Expect(err).NotTo(HaveOccurred())
	}

	kubeconfig, err = testenv.AdminKubeconfig(env, "operator", GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	gexec.CleanupBuildArtifacts()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

var _ = Describe("the operator binary", func() {
	It("starts, leads, serves probes and secured metrics, and stops on SIGTERM", func() {
		probeAddr, metricsAddr := freeAddr(), freeAddr()
		cmd := exec.Command(managerBin,
			"--leader-elect", "--leader-election-namespace=default",
			"--health-probe-bind-address="+probeAddr,
			"--metrics-bind-address="+metricsAddr,
			// No webhook certificate here; the controllers suite serves
			// the webhooks with envtest's.
			"--enable-webhooks=false",
		)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill() })

		By("answering its readiness and liveness probes")
		for _, path := range []string{"/readyz", "/healthz"} {
			Eventually(func() (int, error) {
				resp, err := http.Get("http://" + probeAddr + path)
				if err != nil {
					return 0, err
				}
				resp.Body.Close()
				return resp.StatusCode, nil
			}).WithTimeout(60 * time.Second).Should(Equal(http.StatusOK))
		}

		By("winning leader election")
		lease := &coordinationv1.Lease{}
		Eventually(func() (string, error) {
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: leaseName}, lease); err != nil {
				return "", err
			}
			if lease.Spec.HolderIdentity == nil {
				return "", nil
			}
			return *lease.Spec.HolderIdentity, nil
		}).WithTimeout(60 * time.Second).ShouldNot(BeEmpty())

		By("refusing metrics scrapes without a token")
		insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		Eventually(func() (int, error) {
			resp, err := insecure.Get(fmt.Sprintf("https://%s/metrics", metricsAddr))
			if err != nil {
				return 0, err
			}
			resp.Body.Close()
			return resp.StatusCode, nil
		}).WithTimeout(30 * time.Second).Should(Equal(http.StatusUnauthorized))

		By("stopping on SIGTERM and releasing the Lease")
		session.Signal(syscall.SIGTERM)
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit(0))
		Expect(session.Err).To(gbytes.Say("starting manager"))
		Eventually(func() (string, error) {
			if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: leaseName}, lease); err != nil {
				return "", err
			}
			if lease.Spec.HolderIdentity == nil {
				return "", nil
			}
			return *lease.Spec.HolderIdentity, nil
		}).WithTimeout(30 * time.Second).Should(BeEmpty())
	})
})
