package controllers_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/internal/builders"
	"github.com/strata-storage/strata/test/testenv"
)

// strataBin is the engine binary: $STRATA_BIN, else bin/strata of the repo
// (`make build` writes it before the suites run).
func strataBin() string {
	if b := os.Getenv("STRATA_BIN"); b != "" {
		return b
	}
	return filepath.Join(testenv.RepoRoot(), "bin", "strata")
}

// One story against a real `strata server` process: the operator's
// generated root keys and rendered IAM file are what the engine starts with,
// and the declared buckets are created through its S3 API once the pool is
// ready; capacity comes from its admin API.
var _ = Describe("against a real strata server", func() {
	It("creates the declared buckets and reads capacity", func() {
		bin := strataBin()
		out, _ := exec.Command(bin, "server", "--help").CombinedOutput()
		Expect(string(out)).To(ContainSubstring("usage: strata server"), "the engine binary %s must be built (make build)", bin)

		ns := newNamespace()
		t := tenant(ns)
		t.Spec.TLS.Mode = v1.TLSDisabled
		days := func(n int32) *int32 { return &n }
		t.Spec.Buckets = []v1.BucketSpec{{Name: "photos", Versioning: "Enabled", Notifications: &v1.BucketNotifications{Rules: []v1.BucketNotificationRule{
			{Target: "hook", Events: []string{"s3:ObjectCreated:*"}, Suffix: ".jpg"}}}},
			{Name: "logs", Encryption: &v1.BucketEncryption{Algorithm: "AES256"},
				Lifecycle: &v1.BucketLifecycle{ExpirationDays: days(30), AbortIncompleteMultipartUploadDays: days(2)}},
			{Name: "vault", ObjectLock: &v1.BucketObjectLock{Mode: "COMPLIANCE", Days: 30}, Encryption: &v1.BucketEncryption{Algorithm: "aws:kms"}}}
		t.Spec.Users = []v1.UserSpec{{Name: "app", SecretRef: v1.SecretReference{Name: "app-keys"}, Policy: "readonly", Buckets: []string{"*"}}}
		t.Spec.WebIdentity.ServiceAccounts = true
		// A webhook the claims' notifications are sent to.
		hook := newEventHook()
		DeferCleanup(hook.Close)
		t.Spec.Notifications.Targets = []v1.NotificationTargetSpec{{Name: "hook", Type: "webhook", Endpoint: hook.URL},
			{Name: "claims-hook", Type: "webhook", Endpoint: hook.URL}}
		Expect(k8s.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1ObjectMeta(ns, "app-keys"),
			StringData: map[string]string{"accessKey": "APPKEY0000", "secretKey": "app-secret-0000"},
		})).To(Succeed())
		Expect(k8s.Create(ctx, t)).To(Succeed())
		sp := nvmePool(ns)
		Expect(k8s.Create(ctx, sp)).To(Succeed())

		By("starting the engine with the operator's root keys and IAM file, mounted as files")
		root, iam, keys, targets := &corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}, &corev1.Secret{}
		Eventually(func() error { return k8s.Get(ctx, key(ns, builders.NotifyTargetsSecretName("media")), targets) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-root-credentials"), root) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-iam"), iam) }).Should(Succeed())
		Eventually(func() error { return k8s.Get(ctx, key(ns, "media-encryption-keys"), keys) }).Should(Succeed())
		dir := GinkgoT().TempDir()
		files := map[string][]byte{
			"accessKey": root.Data[builders.AccessKeyKey], "secretKey": root.Data[builders.SecretKeyKey], "iam.json": iam.Data[builders.IAMFileKey],
			"keys.json": keys.Data[builders.EncryptionKeysFileKey], "targets.json": targets.Data[builders.NotifyTargetsFileKey],
		}
		for name, data := range files {
			Expect(os.WriteFile(filepath.Join(dir, name), data, 0o600)).To(Succeed())
		}
		for i := 1; i <= 4; i++ {
			Expect(os.MkdirAll(filepath.Join(dir, fmt.Sprintf("d%d", i)), 0o700)).To(Succeed())
		}
		// The engine reads the API server's token issuer with the cluster's
		// CA, as a pod does with its mounted ca.crt.
		Expect(os.WriteFile(filepath.Join(dir, "cluster-ca.pem"), cfg.CAData, 0o600)).To(Succeed())
		addr := startEngine([]string{
			builders.EnvRootUserFile + "=" + filepath.Join(dir, "accessKey"),
			builders.EnvRootPasswordFile + "=" + filepath.Join(dir, "secretKey"),
			builders.EnvIAMFile + "=" + filepath.Join(dir, "iam.json"),
			"STRATA_KMS_KEYS_FILE=" + filepath.Join(dir, "keys.json"),
			"STRATA_OIDC_CA_FILE=" + filepath.Join(dir, "cluster-ca.pem"),
			"STRATA_NOTIFY_TARGETS_FILE=" + filepath.Join(dir, "targets.json"),
		}, filepath.Join(dir, "d{1...4}"))
		fakeEn.route(ns, "http://"+addr)

		By("marking the servers ready, as the StatefulSet controller would")
		markStatefulSetReady(ns, "media-nvme")
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).WithTimeout(60 * time.Second).Should(Equal("True/Reconciled"))

		By("finding the buckets through S3, with versioning on photos")
		cl := s3.New(s3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(string(files["accessKey"]), string(files["secretKey"]), ""),
		})
		list, err := cl.ListBuckets(context.Background(), &s3.ListBucketsInput{})
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, b := range list.Buckets {
			names = append(names, aws.ToString(b.Name))
		}
		Expect(names).To(ConsistOf("photos", "logs", "vault"))
		v, err := cl.GetBucketVersioning(context.Background(), &s3.GetBucketVersioningInput{Bucket: aws.String("photos")})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(v.Status)).To(Equal("Enabled"))

		By("finding the declared lock, default encryption and lifecycle through S3")
		bg := context.Background()
		lock, err := cl.GetObjectLockConfiguration(bg, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("vault")})
		Expect(err).NotTo(HaveOccurred())
		Expect(lock.ObjectLockConfiguration.Rule.DefaultRetention.Mode).To(Equal(s3types.ObjectLockRetentionModeCompliance))
		Expect(aws.ToInt32(lock.ObjectLockConfiguration.Rule.DefaultRetention.Days)).To(Equal(int32(30)))
		enc, err := cl.GetBucketEncryption(bg, &s3.GetBucketEncryptionInput{Bucket: aws.String("logs")})
		Expect(err).NotTo(HaveOccurred())
		Expect(enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm).To(Equal(s3types.ServerSideEncryptionAes256))
		lc, err := cl.GetBucketLifecycleConfiguration(bg, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("logs")})
		Expect(err).NotTo(HaveOccurred())
		Expect(lc.Rules).To(HaveLen(1))
		Expect(aws.ToString(lc.Rules[0].ID)).To(Equal("strata-operator"))
		Expect(aws.ToInt32(lc.Rules[0].Expiration.Days)).To(Equal(int32(30)))
		Expect(aws.ToInt32(lc.Rules[0].AbortIncompleteMultipartUpload.DaysAfterInitiation)).To(Equal(int32(2)))
		put, err := cl.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String("vault"), Key: aws.String("backup"), Body: strings.NewReader("immutable")})
		Expect(err).NotTo(HaveOccurred())
		Expect(put.ServerSideEncryption).To(Equal(s3types.ServerSideEncryptionAwsKms), "the bucket's default encryption with the tenant's key")
		_, err = cl.DeleteObject(bg, &s3.DeleteObjectInput{Bucket: aws.String("vault"), Key: aws.String("backup"), VersionId: put.VersionId})
		Expect(err).To(HaveOccurred(), "a version under the default COMPLIANCE retention was deleted")
		Expect(k8s.Get(ctx, key(ns, "media"), t)).To(Succeed())
		Expect(t.Status.Buckets).To(ContainElement(v1.BucketStatus{Name: "vault", Versioning: "Enabled", ObjectLock: "COMPLIANCE 30 days", Encryption: "aws:kms"}))
		Expect(t.Status.Buckets).To(ContainElement(v1.BucketStatus{Name: "logs", Encryption: "AES256", Lifecycle: "expire after 30 days, abort uploads after 2 days"}))
		Expect(t.Status.Buckets).To(ContainElement(v1.BucketStatus{Name: "photos", Versioning: "Enabled", Notifications: "1 rule to hook"}))

		By("sending a declared bucket's events to the tenant's webhook, as its rule says")
		for _, k := range []string{"cat.png", "cat.jpg"} {
			_, err := cl.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String(k), Body: strings.NewReader("meow")})
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(hook.received).WithTimeout(15 * time.Second).Should(ContainElement("ObjectCreated:Put photos/cat.jpg"))
		Expect(hook.received()).NotTo(ContainElement(ContainSubstring("cat.png")), "a key the rule's suffix does not match")

		By("refusing a declared bucket's rule whose target the tenant does not have, naming those it has")
		update(t, func(t *v1.Tenant) {
			t.Spec.Buckets[0].Notifications.Rules[0].Target = "nowhere"
		})
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).Should(Equal("False/BucketCreateFailed"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring(`spec.buckets[0].notifications.rules[0].target: Tenant `+ns+`/media has no notification target "nowhere" (its spec.notifications.targets: hook, claims-hook)`))))
		Eventually(func() []string { return bucketNames(t) }).Should(ConsistOf("logs", "vault"), "the other buckets are kept; only the one with the bad rule waits")
		update(t, func(t *v1.Tenant) {
			t.Spec.Buckets[0].Notifications.Rules[0].Target = "hook"
		})
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).WithTimeout(60 * time.Second).Should(Equal("True/Reconciled"))

		By("undoing a change made through S3 to a declared bucket at the next resync")
		_, err = cl.PutBucketVersioning(bg, &s3.PutBucketVersioningInput{Bucket: aws.String("photos"),
			VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (s3types.BucketVersioningStatus, error) {
			v, err := cl.GetBucketVersioning(bg, &s3.GetBucketVersioningInput{Bucket: aws.String("photos")})
			if err != nil {
				return "", err
			}
			return v.Status, nil
		}).WithTimeout(60 * time.Second).Should(Equal(s3types.BucketVersioningStatusEnabled))

		By("refusing to pretend: a lock declared on a bucket that exists without one")
		_, err = cl.CreateBucket(bg, &s3.CreateBucketInput{Bucket: aws.String("plain")})
		Expect(err).NotTo(HaveOccurred())
		update(t, func(t *v1.Tenant) {
			t.Spec.Buckets = append(t.Spec.Buckets, v1.BucketSpec{Name: "plain", ObjectLock: &v1.BucketObjectLock{}})
		})
		Eventually(tenantCondition(t, v1.ConditionBucketsReady)).WithTimeout(60 * time.Second).Should(Equal("False/BucketCreateFailed"))
		Expect(t.Status.Conditions).To(ContainElement(HaveField("Message", ContainSubstring("bucket plain exists without object lock"))))
		Expect(bucketNames(t)).To(ConsistOf("photos", "logs", "vault"), "the buckets S3 took are kept in status")

		By("registering the cluster's ServiceAccount issuer; a ServiceAccount's token buys S3 credentials with no key")
		webIdentityStory(t, addr, files["accessKey"], files["secretKey"])

		By("serving bucket claims and accesses of an application namespace")
		claimsStory(t, addr, files["accessKey"], files["secretKey"], hook)

		By("reading capacity from the admin API")
		Eventually(func() (int64, error) {
			err := k8s.Get(ctx, key(ns, "media"), t)
			if err != nil || t.Status.Capacity == nil || t.Status.Capacity.Raw == nil {
				return 0, err
			}
			return t.Status.Capacity.Raw.Value(), nil
		}).WithTimeout(60 * time.Second).Should(BeNumerically(">", 0))
	})
})

// startEngine runs `strata server` on a free loopback address with the
// given environment and endpoint arguments, stops it when the spec ends,
// and returns its address once it is ready.
func startEngine(env []string, args ...string) string {
	addr := freeLocalAddr()
	cmd := exec.Command(strataBin(), append([]string{"server", "--address", addr, "--no-sync", "--admin-over-http"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() { session.Terminate().Wait(30 * time.Second) })
	EventuallyWithOffset(1, func() (int, error) {
		resp, err := http.Get("http://" + addr + builders.HealthReady)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}).WithTimeout(60 * time.Second).Should(Equal(http.StatusOK))
	return addr
}

func freeLocalAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	defer l.Close()
	return l.Addr().String()
}

// webIdentityStory: the operator registered the API server's token issuer
// with the tenant for the tenant's own audience; a role trusting one
// ServiceAccount is made through IAM; a token the API server signs for
// that ServiceAccount (TokenRequest, as the kubelet projects one) buys a
// session through the AWS SDK's web identity provider, which writes and
// reads the bucket the role allows; another ServiceAccount's token, and a
// token for the API server's audience, are refused.
func webIdentityStory(t *v1.Tenant, addr string, access, secret []byte) {
	Eventually(tenantCondition(t, v1.ConditionWebIdentityReady)).WithTimeout(60 * time.Second).Should(Equal("True/Reconciled"))
	Expect(k8s.Get(ctx, key(t.Namespace, t.Name), t)).To(Succeed())
	w := t.Status.WebIdentity
	Expect(w).NotTo(BeNil())
	Expect(w.Audience).To(Equal("sts.strata.dev/" + t.Namespace + "/" + t.Name))
	Expect(w.Issuer).To(HavePrefix("https://127.0.0.1:"))
	Expect(w.Providers).To(HaveLen(1))
	provider := strings.TrimSuffix(strings.TrimPrefix(w.Issuer, "https://"), "/")
	Expect(w.Providers[0]).To(Equal("arn:aws:iam:::oidc-provider/" + provider))

	// The engine reads the issuer's keys as an outside verifier: the
	// discovery ClusterRole bound to unauthenticated requests (a choice
	// Kubernetes documents for verifiers outside the cluster; in a pod the
	// engine presents its own token instead).
	Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "oidc-discovery-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:unauthenticated"}}})).To(Succeed())

	bg := context.Background()
	root := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr),
		Credentials: credentials.NewStaticCredentialsProvider(string(access), string(secret), "")})
	trust := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":%q},`+
		`"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{%q:%q,%q:%q}}}]}`,
		w.Providers[0], provider+":sub", "system:serviceaccount:"+t.Namespace+":uploader", provider+":aud", w.Audience)
	_, err := root.CreateRole(bg, &iam.CreateRoleInput{RoleName: aws.String("uploader"), AssumeRolePolicyDocument: aws.String(trust)})
	Expect(err).NotTo(HaveOccurred())
	_, err = root.PutRolePolicy(bg, &iam.PutRolePolicyInput{RoleName: aws.String("uploader"), PolicyName: aws.String("photos"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":["arn:aws:s3:::photos","arn:aws:s3:::photos/*"]}]}`)})
	Expect(err).NotTo(HaveOccurred())

	token := func(sa, audience string) string {
		acct := &corev1.ServiceAccount{ObjectMeta: metav1ObjectMeta(t.Namespace, sa)}
		if err := k8s.Create(ctx, acct); err != nil && !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}}}
		Expect(k8s.SubResource("token").Create(ctx, acct, tr)).To(Succeed())
		return tr.Status.Token
	}
	tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(tokenFile, []byte(token("uploader", w.Audience)), 0o600)).To(Succeed())
	stsClient := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr)})
	creds := aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(stsClient, "arn:aws:iam:::role/uploader", stscreds.IdentityTokenFile(tokenFile)))
	pod := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + addr), UsePathStyle: true, Credentials: creds})
	_, err = pod.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String("photos"), Key: aws.String("from-a-pod"), Body: strings.NewReader("no key anywhere")})
	Expect(err).NotTo(HaveOccurred())
	got, err := pod.GetObject(bg, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("from-a-pod")})
	Expect(err).NotTo(HaveOccurred())
	got.Body.Close()
	_, err = pod.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String("logs"), Key: aws.String("x"), Body: strings.NewReader("x")})
	Expect(err).To(MatchError(ContainSubstring("AccessDenied")), "a bucket the role does not name")

	for _, c := range []struct{ sa, audience, code string }{
		{"other", w.Audience, "AccessDenied"},
		{"uploader", "https://kubernetes.default.svc", "InvalidIdentityToken"},
	} {
		_, err := stsClient.AssumeRoleWithWebIdentity(bg, &sts.AssumeRoleWithWebIdentityInput{RoleArn: aws.String("arn:aws:iam:::role/uploader"),
			RoleSessionName: aws.String("x1"), WebIdentityToken: aws.String(token(c.sa, c.audience))})
		Expect(err).To(MatchError(ContainSubstring(c.code)), "ServiceAccount %s, audience %s", c.sa, c.audience)
	}
}

// bucketNames reads the Tenant and names the buckets its status lists.
func bucketNames(t *v1.Tenant) []string {
	if err := k8s.Get(ctx, key(t.Namespace, t.Name), t); err != nil {
		return nil
	}
	var names []string
	for _, b := range t.Status.Buckets {
		names = append(names, b.Name)
	}
	return names
}
