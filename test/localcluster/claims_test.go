package localcluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/buildinfo"
)

// claimsFromPods: an application namespace the demo Tenant selects claims
// a bucket and a role for its ServiceAccount (docs/claims.md); a pod on a
// real kubelet, with nothing but a projected token of the tenant's
// audience and the access's ConfigMap, writes and reads the bucket through
// the AWS SDK's own web identity provider (`strata selftest
// --aws-credentials`: config.LoadDefaultConfig); the same pod is refused
// a bucket another namespace claimed.
func claimsFromPods(ctx context.Context, t *testing.T, kc client.Client, cs kubernetes.Interface) {
	ref := v1.ClaimTenantReference{Namespace: "default", Name: "media"}
	for _, ns := range []string{"team-a", "team-b"} {
		if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"strata.dev/claims": "media"}}}); err != nil {
			t.Fatal(err)
		}
		if err := kc.Create(ctx, &v1.BucketClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}, Spec: v1.BucketClaimSpec{TenantRef: ref}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kc.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	access := &v1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
		Spec: v1.BucketAccessSpec{BucketClaims: []string{"data"}, Role: v1.AccessReadWrite, ServiceAccountName: "app"}}
	if err := kc.Create(ctx, access); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, 2*time.Minute, func() error {
		if err := kc.Get(ctx, client.ObjectKeyFromObject(access), access); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(access.Status.Conditions, v1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			t := &v1.Tenant{}
			_ = kc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "media"}, t)
			return fmt.Errorf("BucketAccess team-a/app not Ready: %+v; the Tenant's web identity: %+v, %+v", c,
				meta.FindStatusCondition(t.Status.Conditions, v1.ConditionWebIdentityReady), t.Status.WebIdentity)
		}
		return nil
	})
	other := &v1.BucketClaim{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "data"}, other); err != nil || other.Status.BucketName == "" {
		t.Fatalf("team-b's claim: %v %+v", err, other.Status)
	}
	tenant := &v1.Tenant{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "media"}, tenant); err != nil || tenant.Status.WebIdentity == nil {
		t.Fatalf("the demo Tenant's web identity: %v %+v", err, tenant.Status.WebIdentity)
	}

	// selftest runs `strata selftest` in a pod of team-a's ServiceAccount
	// against bucket (empty: the claimed one, from the ConfigMap) and
	// returns its phase and log.
	selftest := func(name, bucket, wait string) (corev1.PodPhase, string) {
		if bucket == "" {
			bucket = "$(BUCKET_NAME)"
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}, Spec: corev1.PodSpec{
			ServiceAccountName: "app", RestartPolicy: corev1.RestartPolicyNever,
			// The default token is not mounted: the projected one of the
			// tenant's audience is all the pod holds.
			AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "app", Image: buildinfo.EngineImage(), ImagePullPolicy: corev1.PullIfNotPresent,
				Args:    []string{"selftest", "--aws-credentials", "--endpoint", "$(AWS_ENDPOINT_URL)", "--ca-file", "/etc/strata/ca.crt", "--bucket", bucket, "--wait", wait},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
				Env:     []corev1.EnvVar{{Name: "AWS_WEB_IDENTITY_TOKEN_FILE", Value: "/var/run/secrets/strata/token"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/secrets/strata", ReadOnly: true},
					{Name: "ca", MountPath: "/etc/strata", ReadOnly: true}},
			}},
			Volumes: []corev1.Volume{
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
					ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: tenant.Status.WebIdentity.Audience, ExpirationSeconds: ptr.To(int64(3600)), Path: "token"}}}}}},
				{Name: "ca", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}},
			},
		}}
		if err := kc.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, 3*time.Minute, func() error {
			if err := kc.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("pod %s is %s", name, pod.Status.Phase)
			}
			return nil
		})
		logs, err := cs.CoreV1().Pods("team-a").GetLogs(name, &corev1.PodLogOptions{}).Stream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer logs.Close()
		out, err := io.ReadAll(logs)
		if err != nil {
			out = append(out, fmt.Sprintf("(reading the log: %v)", err)...)
		}
		for _, c := range pod.Status.ContainerStatuses {
			if term := c.State.Terminated; term != nil {
				out = append(out, fmt.Sprintf("\n(container %s: exit %d, %s: %s)", c.Name, term.ExitCode, term.Reason, term.Message)...)
			}
		}
		return pod.Status.Phase, string(out)
	}
	// The claimed pod waits while its access reaches every server (a
	// HEAD's 403 may be that); the refused one is refused at once and
	// again after 2 s, and needs no longer.
	if phase, log := selftest("claimed", "", "30s"); phase != corev1.PodSucceeded || !strings.Contains(log, "ok: 2 objects written, read back intact and deleted") {
		t.Errorf("a pod with only its projected token, on its claimed bucket: %s\n%s", phase, log)
	}
	// A HEAD has no body: the refusal is its status, 403.
	if phase, log := selftest("elsewhere", other.Status.BucketName, "3s"); phase != corev1.PodFailed || !strings.Contains(log, "StatusCode: 403") {
		t.Errorf("the same pod on team-b's bucket: %s (want Failed, 403)\n%s", phase, log)
	}
}
