package builders

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/keysfile"
)

// The encryption master keys reach the servers as the engine's keys file
// (engine/keysfile), mounted from a Secret: kubelet updates the file when the
// Secret changes and the engine reloads it, so a rotation needs no restart.
const (
	// EncryptionKeysFileKey is the key of the keys file in its Secret.
	EncryptionKeysFileKey = "keys.json"
	// EncryptionKeysMountPath is where servers find it.
	EncryptionKeysMountPath = "/etc/strata/kms"
)

// NewEncryptionKeys generates a tenant's keys file with one 256-bit key
// (crypto/rand in the operator), named after the tenant. The Secret
// carries no owner reference: objects sealed with its key cannot be read
// without it, so it outlives the Tenant like the data may.
func NewEncryptionKeys(t *v1.Tenant, random io.Reader) (*corev1.Secret, error) {
	key := make([]byte, keysfile.KeySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, fmt.Errorf("generating an encryption key: %w", err)
	}
	id := t.Name + "-1"
	doc, err := json.Marshal(keysfile.File{Default: id, Keys: map[string]string{id: base64.StdEncoding.EncodeToString(key)}})
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: GeneratedEncryptionKeysSecretName(t.Name), Namespace: t.Namespace,
			Labels: TenantLabels(t.Name),
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{EncryptionKeysFileKey: doc},
	}, nil
}

// EncryptionKeysIn checks the keys file of a Secret as the engine reads it
// and describes it; the error names what is wrong, never a key.
func EncryptionKeysIn(s *corev1.Secret) (*v1.EncryptionStatus, error) {
	doc, ok := s.Data[EncryptionKeysFileKey]
	if !ok {
		return nil, fmt.Errorf("the Secret %q has no %s", s.Name, EncryptionKeysFileKey)
	}
	keys, def, err := keysfile.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("the Secret %q: %w", s.Name, err)
	}
	return &v1.EncryptionStatus{KeysSecret: s.Name, DefaultKey: def, Keys: int32(len(keys))}, nil
}

// encryptionKeys are the server's volume, mount and variable for the keys
// file ("" secret: none).
func (e Engine) encryptionKeys() ([]corev1.Volume, []corev1.VolumeMount, []corev1.EnvVar) {
	if e.EncryptionSecret == "" {
		return nil, nil, nil
	}
	return []corev1.Volume{{Name: "encryption-keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: e.EncryptionSecret, DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: EncryptionKeysFileKey, Path: EncryptionKeysFileKey}},
		}}}},
		[]corev1.VolumeMount{{Name: "encryption-keys", MountPath: EncryptionKeysMountPath, ReadOnly: true}},
		[]corev1.EnvVar{{Name: keysfile.EnvVar, Value: EncryptionKeysMountPath + "/" + EncryptionKeysFileKey}}
}
