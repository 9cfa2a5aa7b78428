package controllers_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/controllers"
	"github.com/strata-storage/strata/internal/engine"
)

// claimMessage is the message of c's Ready condition once it reads want
// ("STATUS/REASON"), "" until then.
func claimMessage(c *v1.BucketClaim, want string) func() string {
	return func() string {
		if st, err := claimCondition(c)(); err != nil || st != want {
			return ""
		}
		return readyOf(c.Status.Conditions).Message
	}
}

func claimCondition(c *v1.BucketClaim) func() (string, error) {
	return condition(c, func() []metav1.Condition { return c.Status.Conditions }, v1.ConditionReady)
}

func accessCondition(a *v1.BucketAccess) func() (string, error) {
	return condition(a, func() []metav1.Condition { return a.Status.Conditions }, v1.ConditionReady)
}

func readyOf(conds []metav1.Condition) metav1.Condition {
	for _, c := range conds {
		if c.Type == v1.ConditionReady {
			return c
		}
	}
	return metav1.Condition{}
}

func s3ErrCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// appNamespace makes a namespace with labels.
func appNamespace(labels map[string]string) string {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "app-", Labels: labels}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	return n.Name
}

var _ = Describe("bucket claims, refused", func() {
	It("checks what a claim or an access says before anything is made", func() {
		ns := appNamespace(nil)
		tenantRef := v1.ClaimTenantReference{Namespace: "nowhere", Name: "media"}

		By("refusing accesses that name both or neither kind of credentials, or both a role and a policy")
		for _, spec := range []v1.BucketAccessSpec{
			{BucketClaims: []string{"a"}, Role: v1.AccessRead},
			{BucketClaims: []string{"a"}, Role: v1.AccessRead, CredentialsSecretName: "s", ServiceAccountName: "sa"},
			{BucketClaims: []string{"a"}, Role: v1.AccessRead, Policy: "{}", CredentialsSecretName: "s"},
			{BucketClaims: []string{"a"}, CredentialsSecretName: "s"},
		} {
			err := k8s.Create(ctx, &v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: spec})
			Expect(err).To(MatchError(ContainSubstring("set exactly one of")), "%+v", spec)
		}
		err := k8s.Create(ctx, &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"},
			Spec: v1.BucketClaimSpec{TenantRef: tenantRef, Quota: &v1.BucketQuota{}}})
		Expect(err).To(MatchError(ContainSubstring("a quota needs maxSize, maxObjects or both")))

		By("saying so when the Tenant does not exist")
		c := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}, Spec: v1.BucketClaimSpec{TenantRef: tenantRef}}
		Expect(k8s.Create(ctx, c)).To(Succeed())
		Eventually(claimCondition(c)).Should(Equal("False/TenantNotFound"))
		Eventually(eventsFor(ns, "data")).Should(ContainElement("TenantNotFound"))
		Expect(c.Spec.DeletionPolicy).To(Equal(v1.DeletionPolicyRetain), "the default deletion policy")
		Expect(k8s.Get(ctx, key(ns, "data"), c)).To(Succeed())
		moved := c.DeepCopy()
		moved.Spec.TenantRef.Name = "other"
		Expect(k8s.Update(ctx, moved)).To(MatchError(ContainSubstring("tenantRef is immutable")))

		By("letting go of a claim whose Tenant never existed")
		Expect(k8s.Delete(ctx, c)).To(Succeed())
		Eventually(func() bool { return k8s.Get(ctx, key(ns, "data"), c) != nil }).Should(BeTrue())
		Expect(fakeEn.calls()).NotTo(ContainElement(ContainSubstring(ns)), "nothing was made for a claim of no tenant")
	})
})

// claimsStory: against a real engine, an application namespace claims a
// bucket and credentials once the Tenant selects it; static keys in a
// Secret and a ServiceAccount's role both reach the claimed bucket and
// nothing else; the quota binds; usage reaches the claim's status; keys
// rotate on request; a claim's notification rules send its bucket's
// events to the Tenant's webhook; deleting the access removes its user;
// deleting the claim under deletionPolicy Delete removes the bucket.
func claimsStory(t *v1.Tenant, addr string, rootAccess, rootSecret []byte, hook *eventHook) {
	bg := context.Background()
	endpoint := "http://" + addr
	rootS3 := func(access, secret string) *s3.Client {
		return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(access, secret, ""), RetryMaxAttempts: 1})
	}
	Eventually(tenantCondition(t, v1.ConditionReady)).WithTimeout(60 * time.Second).Should(Equal("True/Reconciled"))
	app := appNamespace(map[string]string{"strata.dev/claims": "media"})
	ref := v1.ClaimTenantReference{Namespace: t.Namespace, Name: t.Name}

	By("refusing a namespace the Tenant does not select")
	claim := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "data"}, Spec: v1.BucketClaimSpec{TenantRef: ref,
		Versioning: "Enabled", DeletionPolicy: v1.DeletionPolicyDelete,
		Quota: &v1.BucketQuota{MaxObjects: ptr.To(int64(3)), MaxSize: ptr.To(resource.MustParse("1Mi"))}}}
	Expect(k8s.Create(ctx, claim)).To(Succeed())
	Eventually(claimCondition(claim)).Should(Equal("False/NamespaceNotAllowed"))
	Expect(readyOf(claim.Status.Conditions).Message).To(ContainSubstring("spec.claims.namespaceSelector"))

	By("making the bucket once the Tenant selects the namespace")
	update(t, func(t *v1.Tenant) {
		t.Spec.Claims.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"strata.dev/claims": "media"}}
	})
	Eventually(claimCondition(claim)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
	bucket := app + "-data"
	Expect(claim.Status.BucketName).To(Equal(bucket))
	Expect(claim.Status.BucketReady).To(BeTrue())

	By("writing the keys of an access to its Secret within 5 seconds")
	access := &v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "writer"},
		Spec: v1.BucketAccessSpec{BucketClaims: []string{"data"}, Role: v1.AccessReadWrite, CredentialsSecretName: "data-keys"}}
	start := time.Now()
	Expect(k8s.Create(ctx, access)).To(Succeed())
	sec := &corev1.Secret{}
	Eventually(func() error { return k8s.Get(ctx, key(app, "data-keys"), sec) }).WithTimeout(5 * time.Second).WithPolling(50 * time.Millisecond).Should(Succeed())
	GinkgoWriter.Printf("the access's Secret existed %v after the access\n", time.Since(start))
	Expect(string(sec.Data[controllers.KeyBucketName])).To(Equal(bucket))
	Expect(string(sec.Data[controllers.KeyRegion])).To(Equal("us-east-1"))
	Expect(string(sec.Data[controllers.KeyEndpointURL])).To(HavePrefix("http://media." + t.Namespace + ".svc."))
	Eventually(accessCondition(access)).Should(Equal("True/Reconciled"))
	Expect(k8s.Get(ctx, key(app, "data-keys"), sec)).To(Succeed())
	Expect(metav1.IsControlledBy(sec, access)).To(BeTrue(), "the Secret goes with the access")
	Expect(access.Status.AccessKeyID).To(Equal(string(sec.Data[controllers.KeyAccessKeyID])))
	Eventually(eventsFor(app, "writer")).Should(ContainElement("KeysIssued"))

	By("using the keys on the claimed bucket and nowhere else; the quota binds")
	keys := rootS3(string(sec.Data[controllers.KeyAccessKeyID]), string(sec.Data[controllers.KeySecretAccessKey]))
	for i := range 3 {
		_, err := keys.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("o" + string(rune('0'+i))), Body: strings.NewReader("claimed")})
		Expect(err).NotTo(HaveOccurred())
	}
	_, err := keys.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("o3"), Body: strings.NewReader("one too many")})
	Expect(s3ErrCode(err)).To(Equal("QuotaExceeded"), "%v", err)
	_, err = keys.GetObject(bg, &s3.GetObjectInput{Bucket: aws.String("photos"), Key: aws.String("from-a-pod")})
	Expect(s3ErrCode(err)).To(Equal("AccessDenied"), "the tenant's own bucket: %v", err)
	_, err = keys.ListBuckets(bg, &s3.ListBucketsInput{})
	Expect(s3ErrCode(err)).To(Equal("AccessDenied"), "listing the tenant's buckets: %v", err)

	By("sending a claim's bucket events to the Tenant's target; refusing a target the Tenant does not have, an event S3 does not make, rules that overlap")
	notified := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "notified"}, Spec: v1.BucketClaimSpec{TenantRef: ref,
		Notifications: &v1.BucketNotifications{Rules: []v1.BucketNotificationRule{{Target: "nowhere", Events: []string{"s3:ObjectCreated:*"}}}}}}
	Expect(k8s.Create(ctx, notified)).To(Succeed())
	Eventually(claimCondition(notified)).WithTimeout(30 * time.Second).Should(Equal("False/ClaimInvalid"))
	Expect(readyOf(notified.Status.Conditions).Message).To(And(ContainSubstring(`no notification target "nowhere"`), ContainSubstring("targets: hook, claims-hook")))
	Expect(notified.Status.BucketReady).To(BeTrue(), "the bucket is made; only its rules wait")
	setRules := func(rules ...v1.BucketNotificationRule) {
		Eventually(func() error {
			if err := k8s.Get(ctx, key(app, "notified"), notified); err != nil {
				return err
			}
			notified.Spec.Notifications.Rules = rules
			return k8s.Update(ctx, notified)
		}).Should(Succeed())
	}
	Expect(k8s.Get(ctx, key(app, "notified"), notified)).To(Succeed())
	unknown := notified.DeepCopy()
	unknown.Spec.Notifications.Rules = []v1.BucketNotificationRule{{Target: "hook", Events: []string{"s3:ObjectCreated:Nope"}}}
	Expect(k8s.Update(ctx, unknown)).To(MatchError(ContainSubstring("s3:ObjectCreated:Nope")), "an event S3 does not make")
	setRules(v1.BucketNotificationRule{Target: "hook", Events: []string{"s3:ObjectCreated:*"}},
		v1.BucketNotificationRule{Target: "claims-hook", Events: []string{"s3:ObjectCreated:Put"}, Prefix: "in/"})
	Eventually(claimMessage(notified, "False/ClaimInvalid")).WithTimeout(30 * time.Second).Should(ContainSubstring("Configurations overlap"))
	setRules(v1.BucketNotificationRule{Target: "claims-hook", Events: []string{"s3:ObjectCreated:*"}, Prefix: "in/"})
	Eventually(claimCondition(notified)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
	nb := notified.Status.BucketName
	root := rootS3(string(rootAccess), string(rootSecret))
	ncfg, err := root.GetBucketNotificationConfiguration(bg, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(nb)})
	Expect(err).NotTo(HaveOccurred())
	Expect(ncfg.QueueConfigurations).To(HaveLen(1))
	Expect(aws.ToString(ncfg.QueueConfigurations[0].Id)).To(Equal("claims-hook-1"))
	Expect(aws.ToString(ncfg.QueueConfigurations[0].QueueArn)).To(Equal("arn:strata:sqs:us-east-1:claims-hook:webhook"))
	for _, k := range []string{"out/b.txt", "in/a.txt"} {
		_, err := root.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String(nb), Key: aws.String(k), Body: strings.NewReader("event")})
		Expect(err).NotTo(HaveOccurred())
	}
	Eventually(hook.received).WithTimeout(15 * time.Second).Should(ContainElement("ObjectCreated:Put " + nb + "/in/a.txt"))
	Expect(hook.received()).NotTo(ContainElement(ContainSubstring("out/b.txt")), "a key outside the rule's prefix")

	By("following the Tenant's targets: a claim whose target goes says so, and one the servers have not loaded yet waits for them")
	targets := func(fn func([]v1.NotificationTargetSpec) []v1.NotificationTargetSpec) {
		update(t, func(t *v1.Tenant) { t.Spec.Notifications.Targets = fn(t.Spec.Notifications.Targets) })
	}
	var kept v1.NotificationTargetSpec
	targets(func(ts []v1.NotificationTargetSpec) []v1.NotificationTargetSpec {
		kept = ts[1]
		return ts[:1]
	})
	Eventually(claimMessage(notified, "False/ClaimInvalid")).WithTimeout(30 * time.Second).Should(ContainSubstring(`no notification target "claims-hook"`))
	late := kept
	late.Name = "late"
	targets(func(ts []v1.NotificationTargetSpec) []v1.NotificationTargetSpec { return append(ts, kept, late) })
	Eventually(claimCondition(notified)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
	setRules(v1.BucketNotificationRule{Target: "late", Events: []string{"s3:ObjectCreated:*"}})
	Eventually(claimMessage(notified, "False/ClaimFailed")).WithTimeout(30 * time.Second).Should(ContainSubstring("take a change of its spec.notifications.targets as the kubelet updates their targets file"))
	setRules(v1.BucketNotificationRule{Target: "claims-hook", Events: []string{"s3:ObjectCreated:*"}, Prefix: "in/"})
	Eventually(claimCondition(notified)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))

	By("undoing a change made through S3 to a claim's bucket at the next resync")
	_, err = root.PutBucketNotificationConfiguration(bg, &s3.PutBucketNotificationConfigurationInput{Bucket: aws.String(nb),
		NotificationConfiguration: &s3types.NotificationConfiguration{}})
	Expect(err).NotTo(HaveOccurred())
	_, err = root.PutBucketVersioning(bg, &s3.PutBucketVersioningInput{Bucket: aws.String(bucket),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusSuspended}})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() ([]s3types.QueueConfiguration, error) {
		cfg, err := root.GetBucketNotificationConfiguration(bg, &s3.GetBucketNotificationConfigurationInput{Bucket: aws.String(nb)})
		if err != nil {
			return nil, err
		}
		return cfg.QueueConfigurations, nil
	}).WithTimeout(40 * time.Second).Should(ContainElement(HaveField("Id", HaveValue(Equal("claims-hook-1")))))
	Eventually(func() (s3types.BucketVersioningStatus, error) {
		v, err := root.GetBucketVersioning(bg, &s3.GetBucketVersioningInput{Bucket: aws.String(bucket)})
		if err != nil {
			return "", err
		}
		return v.Status, nil
	}).WithTimeout(60 * time.Second).Should(Equal(s3types.BucketVersioningStatusEnabled))

	By("reporting the usage in the claim's status")
	Eventually(func() int64 {
		if k8s.Get(ctx, key(app, "data"), claim) != nil || claim.Status.Usage == nil {
			return -1
		}
		return claim.Status.Usage.Objects
	}).WithTimeout(30 * time.Second).Should(Equal(int64(3)))
	Expect(claim.Status.Usage.Bytes).To(Equal(int64(3 * len("claimed"))))

	By("refusing another namespace the same bucket, and its keys this one's bucket")
	other := appNamespace(map[string]string{"strata.dev/claims": "media"})
	thief := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "data"}, Spec: v1.BucketClaimSpec{TenantRef: ref, BucketName: bucket}}
	Expect(k8s.Create(ctx, thief)).To(Succeed())
	Eventually(claimCondition(thief)).WithTimeout(30 * time.Second).Should(Equal("False/ClaimInvalid"))
	Expect(readyOf(thief.Status.Conditions).Message).To(ContainSubstring("was not made by this claim"))
	own := &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "own"}, Spec: v1.BucketClaimSpec{TenantRef: ref}}
	Expect(k8s.Create(ctx, own)).To(Succeed())
	Eventually(claimCondition(own)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
	_, err = keys.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String(own.Status.BucketName), Key: aws.String("x"), Body: strings.NewReader("x")})
	Expect(s3ErrCode(err)).To(Equal("AccessDenied"), "another namespace's bucket: %v", err)

	By("refusing a policy that reaches beyond the claimed buckets")
	wide := &v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "wide"}, Spec: v1.BucketAccessSpec{BucketClaims: []string{"data"},
		CredentialsSecretName: "wide-keys",
		Policy:                `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"arn:aws:s3:::*"}]}`}}
	Expect(k8s.Create(ctx, wide)).To(Succeed())
	Eventually(accessCondition(wide)).Should(Equal("False/ClaimInvalid"))
	Expect(readyOf(wide.Status.Conditions).Message).To(ContainSubstring("is not one of the claimed buckets"))

	By("letting a ServiceAccount assume a read role through STS, with no key anywhere")
	reader := &v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: app, Name: "reader"},
		Spec: v1.BucketAccessSpec{BucketClaims: []string{"data"}, Role: v1.AccessRead, ServiceAccountName: "reader"}}
	Expect(k8s.Create(ctx, reader)).To(Succeed())
	Eventually(accessCondition(reader)).WithTimeout(30 * time.Second).Should(Equal("True/Reconciled"))
	cm := &corev1.ConfigMap{}
	Expect(k8s.Get(ctx, key(app, "reader"), cm)).To(Succeed())
	roleARN := cm.Data[controllers.KeyRoleARN]
	Expect(cm.Data[controllers.KeySTSEndpointURL]).To(Equal(cm.Data[controllers.KeyEndpointURL]))
	Expect(roleARN).To(Equal(reader.Status.RoleARN))
	Expect(roleARN).To(ContainSubstring(":role/strata-claims/" + app + "/"))
	audience := cm.Data[controllers.KeyAudience]
	Expect(audience).To(Equal("sts.strata.dev/" + t.Namespace + "/" + t.Name))
	token := func(ns, sa string) string {
		acct := &corev1.ServiceAccount{ObjectMeta: metav1ObjectMeta(ns, sa)}
		_ = k8s.Create(ctx, acct)
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: ptr.To(int64(600))}}
		Expect(k8s.SubResource("token").Create(ctx, acct, tr)).To(Succeed())
		return tr.Status.Token
	}
	tokenFile := filepath.Join(GinkgoT().TempDir(), "token")
	Expect(os.WriteFile(tokenFile, []byte(token(app, "reader")), 0o600)).To(Succeed())
	stsClient := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint)})
	pod := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: aws.NewCredentialsCache(stscreds.NewWebIdentityRoleProvider(stsClient, roleARN, stscreds.IdentityTokenFile(tokenFile)))})
	got, err := pod.GetObject(bg, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("o0")})
	Expect(err).NotTo(HaveOccurred())
	got.Body.Close()
	_, err = pod.PutObject(bg, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("w"), Body: strings.NewReader("x")})
	Expect(s3ErrCode(err)).To(Equal("AccessDenied"), "a read role writing: %v", err)
	_, err = pod.ListObjectsV2(bg, &s3.ListObjectsV2Input{Bucket: aws.String(own.Status.BucketName)})
	Expect(s3ErrCode(err)).To(Equal("AccessDenied"), "another namespace's bucket: %v", err)
	_, err = stsClient.AssumeRoleWithWebIdentity(bg, &sts.AssumeRoleWithWebIdentityInput{RoleArn: aws.String(roleARN),
		RoleSessionName: aws.String("thief"), WebIdentityToken: aws.String(token(other, "reader"))})
	Expect(err).To(MatchError(ContainSubstring("AccessDenied")), "a ServiceAccount of the same name in another namespace")

	By("rotating the keys on request: the new key works, the old one no longer does")
	oldID := access.Status.AccessKeyID
	update(access, func(a *v1.BucketAccess) {
		a.Annotations = map[string]string{controllers.AnnotationRotateKeys: "2026-11-29"}
	})
	Eventually(func() string {
		_ = k8s.Get(ctx, key(app, "writer"), access)
		return access.Status.Rotation
	}).WithTimeout(30 * time.Second).Should(Equal("2026-11-29"))
	Expect(k8s.Get(ctx, key(app, "data-keys"), sec)).To(Succeed())
	newID := string(sec.Data[controllers.KeyAccessKeyID])
	Expect(newID).NotTo(Equal(oldID))
	Expect(access.Status.AccessKeyID).To(Equal(newID))
	Eventually(eventsFor(app, "writer")).Should(ContainElement("KeysRotated"))
	rotated := rootS3(newID, string(sec.Data[controllers.KeySecretAccessKey]))
	Eventually(func() error {
		_, err := rotated.HeadObject(bg, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("o0")})
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())
	Eventually(func() string {
		_, err := keys.GetObject(bg, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("o0")})
		return s3ErrCode(err)
	}).WithTimeout(10 * time.Second).Should(Equal("InvalidAccessKeyId"))
	// One rotation asked for is one made: a reconcile that still read the
	// access from before it (the cache) once rotated a second time.
	Expect(sec.Annotations).To(HaveKeyWithValue("storage.strata.dev/keys-rotation", "2026-11-29"))
	Consistently(func() int {
		return len(slices.DeleteFunc(eventsFor(app, "writer")(), func(r string) bool { return r != "KeysRotated" }))
	}).WithTimeout(2 * time.Second).Should(Equal(1))
	Expect(k8s.Get(ctx, key(app, "data-keys"), sec)).To(Succeed())
	Expect(string(sec.Data[controllers.KeyAccessKeyID])).To(Equal(newID))

	By("a user deleted through IAM comes back at the next resync, with a new key in the Secret")
	rootIAM := iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider(string(rootAccess), string(rootSecret), ""), RetryMaxAttempts: 1})
	users, err := rootIAM.ListUsers(bg, &iam.ListUsersInput{PathPrefix: aws.String("/strata-claims/" + app + "/")})
	Expect(err).NotTo(HaveOccurred())
	writer := ""
	for _, u := range users.Users {
		ks, err := rootIAM.ListAccessKeys(bg, &iam.ListAccessKeysInput{UserName: u.UserName})
		Expect(err).NotTo(HaveOccurred())
		for _, k := range ks.AccessKeyMetadata {
			if aws.ToString(k.AccessKeyId) == newID {
				writer = aws.ToString(u.UserName)
			}
		}
	}
	Expect(writer).NotTo(BeEmpty(), "no user of the tenant holds the access's key %s", newID)
	_, err = rootIAM.DeleteAccessKey(bg, &iam.DeleteAccessKeyInput{UserName: aws.String(writer), AccessKeyId: aws.String(newID)})
	Expect(err).NotTo(HaveOccurred())
	_, err = rootIAM.DeleteUserPolicy(bg, &iam.DeleteUserPolicyInput{UserName: aws.String(writer), PolicyName: aws.String(engine.ClaimPolicyName)})
	Expect(err).NotTo(HaveOccurred())
	_, err = rootIAM.DeleteUser(bg, &iam.DeleteUserInput{UserName: aws.String(writer)})
	if err != nil {
		// A resync between the calls above made the user's policy and a
		// key again: the user stays, and the key is replaced all the same.
		Expect(err).To(MatchError(ContainSubstring("DeleteConflict")))
	}
	Eventually(func() string {
		_ = k8s.Get(ctx, key(app, "data-keys"), sec)
		return string(sec.Data[controllers.KeyAccessKeyID])
	}).WithTimeout(30 * time.Second).ShouldNot(Equal(newID))
	Eventually(eventsFor(app, "writer")).Should(ContainElement("KeyLost"))
	Eventually(func() string {
		_ = k8s.Get(ctx, key(app, "writer"), access)
		return access.Status.AccessKeyID
	}).Should(Equal(string(sec.Data[controllers.KeyAccessKeyID])))
	rotated = rootS3(string(sec.Data[controllers.KeyAccessKeyID]), string(sec.Data[controllers.KeySecretAccessKey]))
	Eventually(func() error {
		_, err := rotated.HeadObject(bg, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("o0")})
		return err
	}).WithTimeout(10 * time.Second).Should(Succeed())

	By("deleting the access: its user and keys go from the tenant")
	Expect(k8s.Delete(ctx, access)).To(Succeed())
	Eventually(func() bool { return k8s.Get(ctx, key(app, "writer"), access) != nil }).WithTimeout(30 * time.Second).Should(BeTrue())
	Eventually(func() string {
		_, err := rotated.GetObject(bg, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("o0")})
		return s3ErrCode(err)
	}).WithTimeout(10 * time.Second).Should(Equal("InvalidAccessKeyId"))

	By("deleting the claim under deletionPolicy Delete: the bucket and its versions go")
	for _, o := range []client.Object{reader, wide, thief} {
		Expect(k8s.Delete(ctx, o)).To(Succeed())
	}
	Expect(k8s.Delete(ctx, claim)).To(Succeed())
	Eventually(func() bool { return k8s.Get(ctx, key(app, "data"), claim) != nil }).WithTimeout(30 * time.Second).Should(BeTrue())
	root = rootS3(string(rootAccess), string(rootSecret))
	_, err = root.HeadBucket(bg, &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	Expect(err).To(HaveOccurred(), "the bucket of a deleted claim under deletionPolicy Delete")
	Expect(k8s.Delete(ctx, own)).To(Succeed())
	Eventually(func() bool { return k8s.Get(ctx, key(other, "own"), own) != nil }).WithTimeout(30 * time.Second).Should(BeTrue())
	_, err = root.HeadBucket(bg, &s3.HeadBucketInput{Bucket: aws.String(own.Status.BucketName)})
	Expect(err).NotTo(HaveOccurred(), "deletionPolicy Retain keeps the bucket")
}

// eventHook is a webhook target: it keeps "EVENT BUCKET/KEY" of the S3
// event records POSTed to it.
type eventHook struct {
	*httptest.Server
	mu     sync.Mutex
	events []string
}

func newEventHook() *eventHook {
	h := &eventHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			Records []struct {
				EventName string `json:"eventName"`
				S3        struct {
					Bucket struct {
						Name string `json:"name"`
					} `json:"bucket"`
					Object struct {
						Key string `json:"key"`
					} `json:"object"`
				} `json:"s3"`
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rec := range msg.Records {
			key, _ := url.QueryUnescape(rec.S3.Object.Key)
			h.events = append(h.events, rec.EventName+" "+rec.S3.Bucket.Name+"/"+key)
		}
	}))
	return h
}

func (h *eventHook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}
