package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/adminapi"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/internal/engine"
)

// localTopology is the tenant's topology file as a kubelet would mount it,
// with each pool's endpoints swapped for local drive directories, so one
// real strata process serves every pool under the operator's names,
// layouts and states.
func localTopology(cm *corev1.ConfigMap, dir string, drives map[string]int) []byte {
	var doc builders.Topology
	Expect(json.Unmarshal([]byte(cm.Data[builders.TopologyFileKey]), &doc)).To(Succeed())
	for i := range doc.Pools {
		p := &doc.Pools[i]
		n := drives[p.Name]
		for d := 1; d <= n; d++ {
			Expect(os.MkdirAll(filepath.Join(dir, p.Name, fmt.Sprintf("d%d", d)), 0o700)).To(Succeed())
		}
		p.Endpoints = []string{filepath.Join(dir, p.Name, fmt.Sprintf("d{1...%d}", n))}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	return out
}

// One story against a real `strata server`: spec.decommission turns into
// the pool's Draining state in the topology file, the engine moves the
// pool's objects to the other pool, the operator reports Decommissioned,
// and only then may the ServerPool be deleted; every object stays readable.
var _ = Describe("decommissioning a ServerPool against a real strata server", func() {
	It("drains the pool, reports it, lets it go, and loses no object", func() {
		ns := newNamespace()
		t := tenant(ns)
		t.Spec.TLS.Mode = v1.TLSDisabled
		t.Spec.Buckets = nil
		Expect(k8s.Create(ctx, t)).To(Succeed())
		old := nvmePool(ns)
		old.Name = "old"
		Expect(k8s.Create(ctx, old)).To(Succeed())
		newer := nvmePool(ns)
		Expect(k8s.Create(ctx, newer)).To(Succeed())
		drives := map[string]int{"old": 16, "nvme": 16}

		By("mounting the operator's topology file, kept in sync as a kubelet would")
		cm := &corev1.ConfigMap{}
		Eventually(func() bool {
			return k8s.Get(ctx, key(ns, builders.TopologyConfigMapName("media")), cm) == nil &&
				builders.PoolInTopology(cm, "old") && builders.PoolInTopology(cm, "nvme")
		}).WithTimeout(30 * time.Second).Should(BeTrue())
		dir := GinkgoT().TempDir()
		topo := filepath.Join(dir, "topology.json")
		Expect(os.WriteFile(topo, localTopology(cm, dir, drives), 0o600)).To(Succeed())
		syncCtx, stopSync := context.WithCancel(context.Background())
		DeferCleanup(stopSync)
		go func() {
			defer GinkgoRecover()
			for syncCtx.Err() == nil {
				cur := &corev1.ConfigMap{}
				if k8s.Get(syncCtx, key(ns, builders.TopologyConfigMapName("media")), cur) == nil {
					data := localTopology(cur, dir, drives)
					if was, _ := os.ReadFile(topo); !bytes.Equal(was, data) {
						tmp := topo + ".tmp"
						Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
						Expect(os.Rename(tmp, topo)).To(Succeed())
					}
				}
				time.Sleep(300 * time.Millisecond)
			}
		}()

		By("starting the engine on both pools with the operator's root keys")
		root := &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-root-credentials"), root) }).Should(Succeed())
		access, secret := string(root.Data[builders.AccessKeyKey]), string(root.Data[builders.SecretKeyKey])
		addr := startEngine([]string{"STRATA_ROOT_USER=" + access, "STRATA_ROOT_PASSWORD=" + secret}, "--topology", topo, "--insecure-internode")
		fakeEn.route(ns, "http://"+addr)
		markStatefulSetReady(ns, "media-old")
		markStatefulSetReady(ns, "media-nvme")
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "old"), old)
			return old.Status.PoolState, err
		}).WithTimeout(30 * time.Second).Should(Equal(v1.PoolStateActive))

		By("writing objects, which land in both pools")
		cl := s3.New(s3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""),
		})
		_, err := cl.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("data")})
		Expect(err).NotTo(HaveOccurred())
		objects := map[string][]byte{}
		for i := range 30 {
			k, body := fmt.Sprintf("obj-%02d", i), bytes.Repeat([]byte{byte(i)}, 1000+i*7000)
			_, err := cl.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("data"), Key: aws.String(k), Body: bytes.NewReader(body)})
			Expect(err).NotTo(HaveOccurred())
			objects[k] = body
		}

		By("refusing to delete the pool while it holds objects")
		Expect(k8s.Delete(ctx, old)).To(MatchError(ContainSubstring("may hold objects of Tenant media")))

		By("decommissioning it through spec.decommission")
		update(old, func(p *v1.ServerPool) { p.Spec.Decommission = true })
		other := &v1.ServerPool{}
		Expect(k8s.Get(ctx, key(ns, "nvme"), other)).To(Succeed())
		other.Spec.Decommission = true
		Expect(k8s.Update(ctx, other)).To(MatchError(ContainSubstring("nvme is the only ServerPool of Tenant media that takes new objects")))
		Eventually(func() (string, error) {
			err := k8s.Get(ctx, key(ns, "old"), old)
			return old.Status.PoolState, err
		}).WithTimeout(90 * time.Second).Should(Equal(v1.PoolStateDecommissioned))
		Expect(poolCondition(old, v1.ConditionProgressing)()).To(Equal("False/" + v1.ReasonDecommissioned))
		Eventually(eventsFor(ns, old.Name)).Should(ContainElements(v1.ReasonDraining, v1.ReasonDecommissioned))
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/strata/admin/v1/pools/old/decommission", nil)
		Expect(adminapi.Sign(req, access, secret, time.Now())).To(Succeed())
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var progress struct{ ObjectsMoved int64 }
		Expect(json.Unmarshal(body, &progress)).To(Succeed(), string(body))
		Expect(progress.ObjectsMoved).To(BeNumerically(">", 0), "the drain moved nothing: %s", body)

		By("deleting it, which drops it from the topology and from the engine")
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		Eventually(func() bool {
			return k8s.Get(ctx, key(ns, builders.TopologyConfigMapName("media")), cm) == nil && !builders.PoolInTopology(cm, "old")
		}).WithTimeout(30 * time.Second).Should(BeTrue())
		Eventually(func() ([]string, error) {
			info, err := engine.HTTPClient{}.Info(ctx, engine.Endpoint{URL: "http://" + addr, AccessKey: access, SecretKey: secret})
			var names []string
			for _, p := range info.Pools {
				names = append(names, p.Name)
			}
			return names, err
		}).WithTimeout(30 * time.Second).Should(ConsistOf("nvme"))

		By("reading every object back")
		for k, want := range objects {
			out, err := cl.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("data"), Key: aws.String(k)})
			Expect(err).NotTo(HaveOccurred(), k)
			got, err := io.ReadAll(out.Body)
			out.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(bytes.Equal(got, want)).To(BeTrue(), "%s differs after the decommission", k)
		}
	})
})
