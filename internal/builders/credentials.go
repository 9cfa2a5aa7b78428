package builders

import (
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/notifytargets"
)

// Keys of credential Secrets (root and users).
const (
	AccessKeyKey = "accessKey"
	SecretKeyKey = "secretKey"
	// IAMFileKey is the key of the IAM Secret the engine reads
	// (STRATA_IAM_FILE).
	IAMFileKey = "iam.json"
)

// NewRootCredentials generates root keys from random (crypto/rand in the
// operator): a 20-character access key and a 40-character secret key of
// letters and digits, the shapes S3 tools expect. The Secret carries no
// owner reference: with deletionPolicy Retain it outlives the Tenant.
func NewRootCredentials(t *v1.Tenant, random io.Reader) (*corev1.Secret, error) {
	access, err := randomKey(random, 20)
	if err != nil {
		return nil, fmt.Errorf("generating access key: %w", err)
	}
	secret, err := randomKey(random, 40)
	if err != nil {
		return nil, fmt.Errorf("generating secret key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: GeneratedRootSecretName(t.Name), Namespace: t.Namespace,
			Labels: TenantLabels(t.Name),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{AccessKeyKey: []byte(access), SecretKeyKey: []byte(secret)},
	}, nil
}

// keyAlphabet is what generated keys are made of: letters and digits. Keys
// of base64url could begin with '-', and a CLI given one on its command
// line took it for a flag (mc alias set: "flag provided but not defined").
const keyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomKey draws length characters of keyAlphabet uniformly: bytes of 248
// and above (248 = 4 * 62) are drawn again.
func randomKey(random io.Reader, length int) (string, error) {
	const limit = 256 / len(keyAlphabet) * len(keyAlphabet)
	out := make([]byte, 0, length)
	buf := make([]byte, length)
	for len(out) < length {
		need := buf[:length-len(out)]
		if _, err := io.ReadFull(random, need); err != nil {
			return "", err
		}
		for _, b := range need {
			if int(b) < limit {
				out = append(out, keyAlphabet[int(b)%len(keyAlphabet)])
			}
		}
	}
	return string(out), nil
}

// CredentialsIn reads access and secret key from a Secret's data; the error
// names the missing key (never a value).
func CredentialsIn(s *corev1.Secret) (access, secret string, err error) {
	a, s2 := s.Data[AccessKeyKey], s.Data[SecretKeyKey]
	switch {
	case len(a) == 0:
		return "", "", fmt.Errorf("the Secret %q has no %s", s.Name, AccessKeyKey)
	case len(s2) == 0:
		return "", "", fmt.Errorf("the Secret %q has no %s", s.Name, SecretKeyKey)
	}
	return string(a), string(s2), nil
}

// IAMUser is one entry of the engine's IAM file.
type IAMUser struct {
	AccessKey string   `json:"accessKey"`
	SecretKey string   `json:"secretKey"`
	Policy    string   `json:"policy"`
	Buckets   []string `json:"buckets"`
	// DisplayName names the user in ACLs and listings (its name in the
	// Tenant).
	DisplayName string `json:"displayName,omitempty"`
}

// IAMFile is the document the engine reads from STRATA_IAM_FILE.
type IAMFile struct {
	Users []IAMUser `json:"users"`
}

// IAMSecret renders the IAM file for the tenant's users. keys maps a user
// name to its (access, secret) pair, read from the user's Secret. A user's
// buckets are required by the API; ["*"] means every bucket (an empty list
// in the file, which is how the engine reads "every bucket").
func IAMSecret(t *v1.Tenant, keys map[string][2]string) (*corev1.Secret, error) {
	doc := IAMFile{Users: []IAMUser{}}
	for _, u := range t.Spec.Users {
		k, ok := keys[u.Name]
		if !ok {
			return nil, fmt.Errorf("no keys for user %q", u.Name)
		}
		buckets := []string{}
		for _, b := range u.Buckets {
			if b == "*" {
				buckets = []string{}
				break
			}
			buckets = append(buckets, b)
		}
		policy := string(u.Policy)
		if policy == "" {
			policy = "readwrite"
		}
		doc.Users = append(doc.Users, IAMUser{AccessKey: k[0], SecretKey: k[1], Policy: policy, Buckets: buckets, DisplayName: u.Name})
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: IAMSecretName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{IAMFileKey: data},
	}, nil
}

// NotifyTargetsFileKey is the key of the notification targets Secret the
// engine reads (STRATA_NOTIFY_TARGETS_FILE).
const NotifyTargetsFileKey = "targets.json"

// Keys of a notification target's credentials Secret, each optional.
const (
	NotifyTokenKey    = "token"
	NotifyUsernameKey = "username"
	NotifyPasswordKey = "password"
)

// Remote is a replication remote as the operator resolved it: its
// endpoint, credentials and the CA that verifies it (nil: the system's).
type Remote struct {
	Name, Endpoint, AccessKey, SecretKey string
	CA                                   []byte
}

// RemoteCAKey is the key of the targets Secret holding remote's CA.
func RemoteCAKey(remote string) string { return "ca-" + remote + ".crt" }

// RemoteEndpoint is the URL of a Tenant's S3 Service inside the cluster.
func RemoteEndpoint(peer *v1.Tenant) string {
	scheme := "http"
	if TLSEnabled(peer) {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s.%s.svc:%d", scheme, S3ServiceName(peer.Name), peer.Namespace, ServicePort(peer))
}

// NotifyTargetsSecret renders the tenant's notification targets and
// replication remotes as the engine's targets file
// (engine/notifytargets.File), with the remotes' CAs beside it. creds
// maps a target name to the data of its credentials Secret.
func NotifyTargetsSecret(t *v1.Tenant, creds map[string]map[string][]byte, remotes []Remote) (*corev1.Secret, error) {
	doc := notifytargets.File{Targets: []notifytargets.Target{}}
	for _, tg := range t.Spec.Notifications.Targets {
		c := creds[tg.Name]
		doc.Targets = append(doc.Targets, notifytargets.Target{ID: tg.Name, Type: tg.Type, Endpoint: tg.Endpoint, Subject: tg.Subject, Exchange: tg.Exchange,
			AuthToken: string(c[NotifyTokenKey]), Username: string(c[NotifyUsernameKey]), Password: string(c[NotifyPasswordKey])})
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: NotifyTargetsSecretName(t.Name), Namespace: t.Namespace, Labels: TenantLabels(t.Name)},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	for _, r := range remotes {
		tg := notifytargets.Target{ID: r.Name, Type: notifytargets.S3, Endpoint: r.Endpoint, Username: r.AccessKey, Password: r.SecretKey}
		if len(r.CA) > 0 {
			sec.Data[RemoteCAKey(r.Name)] = r.CA
			tg.CAFile = NotifyMountPath + "/" + RemoteCAKey(r.Name)
		}
		doc.Targets = append(doc.Targets, tg)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sec.Data[NotifyTargetsFileKey] = data
	return sec, nil
}
