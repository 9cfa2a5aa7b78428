package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// projectedFile is one file of a Secret, ConfigMap, downward API or
// projected volume.
type projectedFile struct {
	data []byte
	mode os.FileMode
}

// writeProjection lays files out the way the kubelet's atomic writer does:
// the payload in a timestamped directory, `..data` a symlink to it, and each
// top-level name a symlink through `..data`. An update writes a new
// directory and swaps `..data` with one rename, so a reader (the engine
// re-reading its topology file or certificates) sees the old set or the new
// one, never a mix. gid, when not negative, owns the files (fsGroup).
func writeProjection(dir string, files map[string]projectedFile, gid int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if same, _ := projectionEqual(dir, files); same {
		return nil
	}
	ts := filepath.Join(dir, ".."+time.Now().UTC().Format("2006_01_02_15_04_05.000000000"))
	if err := os.Mkdir(ts, 0o755); err != nil {
		return err
	}
	for name, f := range files {
		p := filepath.Join(ts, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, f.mode); err != nil {
			return err
		}
		if gid >= 0 {
			if err := os.Chown(p, 0, gid); err != nil {
				return err
			}
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(ts), tmpLink); err != nil {
		return err
	}
	if err := os.Rename(tmpLink, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	top := map[string]bool{}
	for name := range files {
		top[strings.SplitN(name, "/", 2)[0]] = true
	}
	for name := range top {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return err
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "..") && !top[n] {
			_ = os.Remove(filepath.Join(dir, n))
		}
	}
	if old != "" && old != filepath.Base(ts) {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// projectionEqual says whether dir already holds exactly files.
func projectionEqual(dir string, files map[string]projectedFile) (bool, error) {
	data := filepath.Join(dir, "..data")
	found := map[string]bool{}
	err := filepath.WalkDir(data+"/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(data, p)
		f, ok := files[rel]
		if !ok {
			return fmt.Errorf("extra %s", rel)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if string(b) != string(f.data) || info.Mode().Perm() != f.mode.Perm() {
			return fmt.Errorf("changed %s", rel)
		}
		found[rel] = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return len(found) == len(files), nil
}

// keyFiles turns a Secret's or ConfigMap's data into files, honouring items
// and modes as the kubelet does.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool, what string) (map[string]projectedFile, error) {
	mode := os.FileMode(ptr.Deref(defaultMode, 0o644))
	out := map[string]projectedFile{}
	if len(items) == 0 {
		for k, v := range data {
			out[k] = projectedFile{data: v, mode: mode}
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		out[it.Path] = projectedFile{data: v, mode: m}
	}
	return out, nil
}

func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range cm.Data {
		out[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		out[k] = v
	}
	return out
}

// volumePaths prepares every volume of the pod and returns where each lives
// on this machine. Secrets and ConfigMaps are (re)written on every call, so
// changes reach running containers like the kubelet's periodic sync.
func (w *podWorker) volumePaths(ctx context.Context, pod *corev1.Pod) (map[string]string, error) {
	gid := -1
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	a := w.a
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		dir := filepath.Join(w.dir, "volumes", v.Name)
		switch {
		case v.Secret != nil:
			files := map[string]projectedFile{}
			s, err := a.secrets.Secrets(pod.Namespace).Get(v.Secret.SecretName)
			switch {
			case err == nil:
				files, err = keyFiles(s.Data, v.Secret.Items, v.Secret.DefaultMode, ptr.Deref(v.Secret.Optional, false), "secret "+s.Name)
				if err != nil {
					return nil, err
				}
			case !ptr.Deref(v.Secret.Optional, false):
				return nil, fmt.Errorf("secret %q not found", v.Secret.SecretName)
			}
			if err := writeProjection(dir, files, gid); err != nil {
				return nil, err
			}
		case v.ConfigMap != nil:
			files := map[string]projectedFile{}
			cm, err := a.configMaps.ConfigMaps(pod.Namespace).Get(v.ConfigMap.Name)
			switch {
			case err == nil:
				files, err = keyFiles(configMapData(cm), v.ConfigMap.Items, v.ConfigMap.DefaultMode, ptr.Deref(v.ConfigMap.Optional, false), "configmap "+cm.Name)
				if err != nil {
					return nil, err
				}
			case !ptr.Deref(v.ConfigMap.Optional, false):
				return nil, fmt.Errorf("configmap %q not found", v.ConfigMap.Name)
			}
			if err := writeProjection(dir, files, gid); err != nil {
				return nil, err
			}
		case v.Projected != nil:
			files, err := w.projected(ctx, pod, v.Projected)
			if err != nil {
				return nil, err
			}
			if err := writeProjection(dir, files, gid); err != nil {
				return nil, err
			}
		case v.DownwardAPI != nil:
			files, err := downwardFiles(pod, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
			if err != nil {
				return nil, err
			}
			if err := writeProjection(dir, files, gid); err != nil {
				return nil, err
			}
		case v.EmptyDir != nil:
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, err
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, err
			}
		case v.PersistentVolumeClaim != nil:
			path, err := w.claimPath(pod.Namespace, v.PersistentVolumeClaim.ClaimName)
			if err != nil {
				return nil, err
			}
			if gid >= 0 {
				if err := ownVolume(path, gid); err != nil {
					return nil, err
				}
			}
			dir = path
		case v.HostPath != nil:
			if t := ptr.Deref(v.HostPath.Type, ""); t == corev1.HostPathDirectoryOrCreate {
				if err := os.MkdirAll(v.HostPath.Path, 0o755); err != nil {
					return nil, err
				}
			}
			dir = v.HostPath.Path
		default:
			return nil, fmt.Errorf("volume %q: this node agent supports secret, configMap, projected, downwardAPI, emptyDir, persistentVolumeClaim and hostPath volumes", v.Name)
		}
		out[v.Name] = dir
	}
	return out, nil
}

// claimPath is the directory of the volume bound to a claim.
func (w *podWorker) claimPath(namespace, claim string) (string, error) {
	c, err := w.a.claims.PersistentVolumeClaims(namespace).Get(claim)
	if err != nil {
		return "", fmt.Errorf("claim %q: %w", claim, err)
	}
	if c.Spec.VolumeName == "" || c.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("claim %q is not bound yet", claim)
	}
	pv, err := w.a.volumes.Get(c.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("volume %q of claim %q: %w", c.Spec.VolumeName, claim, err)
	}
	switch {
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	}
	return "", fmt.Errorf("volume %q is neither local nor hostPath", pv.Name)
}

// ownVolume applies fsGroup when the volume's root does not carry it yet
// (fsGroupChangePolicy OnRootMismatch): group ownership, group rw, and the
// setgid bit on directories so new files keep the group.
func ownVolume(path string, gid int) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if sameGroup(st, gid) && st.Mode()&os.ModeSetgid != 0 {
		return nil
	}
	return filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, gid); err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		mode := info.Mode().Perm() | 0o060
		if d.IsDir() {
			mode |= 0o010 | os.ModeSetgid
		}
		return os.Chmod(p, mode)
	})
}

// projected gathers the sources of a projected volume.
func (w *podWorker) projected(ctx context.Context, pod *corev1.Pod, pv *corev1.ProjectedVolumeSource) (map[string]projectedFile, error) {
	out := map[string]projectedFile{}
	add := func(m map[string]projectedFile) {
		for k, v := range m {
			out[k] = v
		}
	}
	for _, src := range pv.Sources {
		switch {
		case src.Secret != nil:
			s, err := w.a.secrets.Secrets(pod.Namespace).Get(src.Secret.Name)
			if err != nil {
				if ptr.Deref(src.Secret.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("secret %q: %w", src.Secret.Name, err)
			}
			m, err := keyFiles(s.Data, src.Secret.Items, pv.DefaultMode, ptr.Deref(src.Secret.Optional, false), "secret "+s.Name)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.ConfigMap != nil:
			cm, err := w.a.configMaps.ConfigMaps(pod.Namespace).Get(src.ConfigMap.Name)
			if err != nil {
				if ptr.Deref(src.ConfigMap.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("configmap %q: %w", src.ConfigMap.Name, err)
			}
			m, err := keyFiles(configMapData(cm), src.ConfigMap.Items, pv.DefaultMode, ptr.Deref(src.ConfigMap.Optional, false), "configmap "+cm.Name)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.DownwardAPI != nil:
			m, err := downwardFiles(pod, src.DownwardAPI.Items, pv.DefaultMode)
			if err != nil {
				return nil, err
			}
			add(m)
		case src.ServiceAccountToken != nil:
			tok, err := w.serviceAccountToken(ctx, pod, src.ServiceAccountToken)
			if err != nil {
				return nil, err
			}
			out[src.ServiceAccountToken.Path] = projectedFile{data: []byte(tok), mode: os.FileMode(ptr.Deref(pv.DefaultMode, 0o644))}
		case src.ClusterTrustBundle != nil, src.PodCertificate != nil:
			return nil, fmt.Errorf("projected volume source not supported by this node agent")
		}
	}
	return out, nil
}

// saToken is a service account token and when to replace it.
type saToken struct {
	token string
	renew time.Time
}

// serviceAccountToken is the token of a projected volume source, bound to
// the pod: requested through the TokenRequest API and kept until it is due
// for renewal. Volumes are refreshed on every pass of the worker; a new
// token each time would sign one and rewrite the volume every few seconds.
func (w *podWorker) serviceAccountToken(ctx context.Context, pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	key := fmt.Sprintf("%s|%s|%d", pod.Spec.ServiceAccountName, src.Audience, ptr.Deref(src.ExpirationSeconds, 0))
	now := time.Now()
	if t, ok := w.tokens[key]; ok && now.Before(t.renew) {
		return t.token, nil
	}
	tok, err := w.a.cs.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:         nonEmpty(src.Audience),
			ExpirationSeconds: src.ExpirationSeconds,
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("service account token: %w", err)
	}
	w.tokens[key] = saToken{token: tok.Status.Token, renew: tokenRenewal(now, tok.Status.ExpirationTimestamp.Time)}
	return tok.Status.Token, nil
}

// tokenRenewal is when a token issued at issued and expiring at expires is
// replaced: once 80% of its life has passed, and after a day at most, the
// kubelet's rule.
func tokenRenewal(issued, expires time.Time) time.Time {
	return issued.Add(min(expires.Sub(issued)*8/10, 24*time.Hour))
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// downwardFiles renders downward API items (pod fields).
func downwardFiles(pod *corev1.Pod, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) (map[string]projectedFile, error) {
	out := map[string]projectedFile{}
	for _, it := range items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downward API item %q: only fieldRef is supported", it.Path)
		}
		var v string
		switch it.FieldRef.FieldPath {
		case "metadata.labels":
			v = formatMap(pod.Labels)
		case "metadata.annotations":
			v = formatMap(pod.Annotations)
		default:
			var err error
			if v, err = podField(pod, it.FieldRef.FieldPath); err != nil {
				return nil, err
			}
		}
		mode := os.FileMode(ptr.Deref(defaultMode, 0o644))
		if it.Mode != nil {
			mode = os.FileMode(*it.Mode)
		}
		out[it.Path] = projectedFile{data: []byte(v), mode: mode}
	}
	return out, nil
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return b.String()
}
