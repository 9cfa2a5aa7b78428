package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// containerUser resolves uid, gid and groups from the security contexts.
func containerUser(pod *corev1.Pod, c *corev1.Container, img image) (uid, gid int, groups []int, err error) {
	uid, gid = img.uid, img.gid
	var nonRoot bool
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
		nonRoot = ptr.Deref(sc.RunAsNonRoot, false)
		if sc.FSGroup != nil {
			groups = append(groups, int(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, int(g))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = int(*sc.RunAsUser)
		}
		if sc.RunAsGroup != nil {
			gid = int(*sc.RunAsGroup)
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	if nonRoot && uid == 0 {
		return 0, 0, nil, fmt.Errorf("container %q has runAsNonRoot and would run as root", c.Name)
	}
	return uid, gid, groups, nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$`)

// expand replaces $(VAR) with the value from env (unknown references stay
// as they are, $$ escapes a dollar), as Kubernetes does in args and env.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// podField is a downward API field of the pod.
func podField(pod *corev1.Pod, field string) (string, error) {
	switch field {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		ips := make([]string, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	for _, prefix := range []string{"metadata.labels", "metadata.annotations"} {
		if strings.HasPrefix(field, prefix+"['") && strings.HasSuffix(field, "']") {
			key := field[len(prefix)+2 : len(field)-2]
			if prefix == "metadata.labels" {
				return pod.Labels[key], nil
			}
			return pod.Annotations[key], nil
		}
	}
	return "", fmt.Errorf("field %q is not supported by this node agent", field)
}

// containerEnv resolves a container's environment: the kubelet's service
// variables for the API server, envFrom, then env in order with $(VAR)
// references to earlier entries.
func (w *podWorker) containerEnv(pod *corev1.Pod, c *corev1.Container, hostname string) ([]string, error) {
	a := w.a
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	set("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	set("HOSTNAME", hostname)
	if svc, err := a.services.Services("default").Get("kubernetes"); err == nil && len(svc.Spec.Ports) > 0 {
		port := fmt.Sprint(svc.Spec.Ports[0].Port)
		set("KUBERNETES_SERVICE_HOST", svc.Spec.ClusterIP)
		set("KUBERNETES_SERVICE_PORT", port)
		set("KUBERNETES_SERVICE_PORT_HTTPS", port)
		set("KUBERNETES_PORT", "tcp://"+svc.Spec.ClusterIP+":"+port)
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			s, err := a.secrets.Secrets(pod.Namespace).Get(from.SecretRef.Name)
			if err != nil {
				if ptr.Deref(from.SecretRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("secret %q: %w", from.SecretRef.Name, err)
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		case from.ConfigMapRef != nil:
			cm, err := a.configMaps.ConfigMaps(pod.Namespace).Get(from.ConfigMapRef.Name)
			if err != nil {
				if ptr.Deref(from.ConfigMapRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("configmap %q: %w", from.ConfigMapRef.Name, err)
			}
			for k, v := range configMapData(cm) {
				set(from.Prefix+k, string(v))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, env))
			continue
		}
		vf := e.ValueFrom
		switch {
		case vf.FieldRef != nil:
			v, err := podField(pod, vf.FieldRef.FieldPath)
			if err != nil {
				return nil, err
			}
			set(e.Name, v)
		case vf.SecretKeyRef != nil:
			s, err := a.secrets.Secrets(pod.Namespace).Get(vf.SecretKeyRef.Name)
			if err != nil {
				if ptr.Deref(vf.SecretKeyRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("secret %q: %w", vf.SecretKeyRef.Name, err)
			}
			v, ok := s.Data[vf.SecretKeyRef.Key]
			if !ok && !ptr.Deref(vf.SecretKeyRef.Optional, false) {
				return nil, fmt.Errorf("secret %q has no key %q", s.Name, vf.SecretKeyRef.Key)
			}
			set(e.Name, string(v))
		case vf.ConfigMapKeyRef != nil:
			cm, err := a.configMaps.ConfigMaps(pod.Namespace).Get(vf.ConfigMapKeyRef.Name)
			if err != nil {
				if ptr.Deref(vf.ConfigMapKeyRef.Optional, false) {
					continue
				}
				return nil, fmt.Errorf("configmap %q: %w", vf.ConfigMapKeyRef.Name, err)
			}
			v, ok := configMapData(cm)[vf.ConfigMapKeyRef.Key]
			if !ok && !ptr.Deref(vf.ConfigMapKeyRef.Optional, false) {
				return nil, fmt.Errorf("configmap %q has no key %q", cm.Name, vf.ConfigMapKeyRef.Key)
			}
			set(e.Name, string(v))
		case vf.ResourceFieldRef != nil:
			// Limits are not enforced here; report the request or limit as declared.
			q, ok := c.Resources.Limits[corev1.ResourceName(strings.TrimPrefix(strings.TrimPrefix(vf.ResourceFieldRef.Resource, "limits."), "requests."))]
			if strings.HasPrefix(vf.ResourceFieldRef.Resource, "requests.") {
				q, ok = c.Resources.Requests[corev1.ResourceName(strings.TrimPrefix(vf.ResourceFieldRef.Resource, "requests."))]
			}
			if ok {
				set(e.Name, q.String())
			}
		}
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// etcFiles are the files of a container's /etc the node agent writes over
// the image's, as a kubelet does: name resolution through /etc/hosts (the
// cluster's DNS here), the hosts file itself and the hostname.
func etcFiles(hosts, hostname string) map[string]string {
	return map[string]string{
		"nsswitch.conf": "hosts: files dns\n",
		"resolv.conf":   "# cluster names resolve through /etc/hosts (the node agent keeps it current)\noptions ndots:1\n",
		"hostname":      hostname + "\n",
		"hosts":         hosts,
	}
}

// containerPaths is where a container's files live on this machine.
type containerPaths struct {
	dir    string // <pod dir>/containers/<name>
	rootfs string
	spec   string
	log    string
}

func (w *podWorker) paths(c string) containerPaths {
	dir := filepath.Join(w.dir, "containers", c)
	return containerPaths{
		dir:    dir,
		rootfs: filepath.Join(dir, "rootfs"),
		spec:   filepath.Join(dir, "spec.json"),
		log:    filepath.Join(w.a.cfg.State, "logs", "pods", fmt.Sprintf("%s_%s_%s.log", w.namespace, w.name, c)),
	}
}

// buildContainer writes the container's root directory and pod-init spec.
func (w *podWorker) buildContainer(pod *corev1.Pod, c *corev1.Container, vols map[string]string) (containerPaths, error) {
	p := w.paths(c.Name)
	img, err := w.a.images.resolve(c.Image)
	if err != nil {
		return p, err
	}
	uid, gid, groups, err := containerUser(pod, c, img)
	if err != nil {
		return p, err
	}
	env, err := w.containerEnv(pod, c, w.hostname)
	if err != nil {
		return p, err
	}
	env = withImageEnv(img.env, env)
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	argv := img.argv(c, func(s string) string { return expand(s, envMap) })

	// A fresh root from the image at every start, as a runtime gives a
	// restarted container (volumes are mounted, not in the root).
	if err := os.RemoveAll(p.rootfs); err != nil {
		return p, err
	}
	if err := linkTree(img.rootfs, p.rootfs); err != nil {
		return p, fmt.Errorf("image %s: %w", img.ref, err)
	}
	if err := os.MkdirAll(filepath.Join(p.rootfs, "etc"), 0o755); err != nil {
		return p, err
	}
	for name, content := range etcFiles(w.hostsFile(), w.hostname) {
		if err := writeFileAtomic(filepath.Join(p.rootfs, "etc", name), []byte(content), 0o644); err != nil {
			return p, err
		}
	}

	spec := containerSpec{
		Rootfs: p.rootfs,
		NetNS:  fmt.Sprintf("/proc/%d/ns/net", w.pausePID),
		UTSNS:  fmt.Sprintf("/proc/%d/ns/uts", w.pausePID),
		UID:    uid, GID: gid, Groups: groups,
		Argv: argv, Env: env, Dir: cmp.Or(c.WorkingDir, img.workdir),
	}
	if sc := c.SecurityContext; sc != nil {
		spec.ReadOnlyRoot = ptr.Deref(sc.ReadOnlyRootFilesystem, false)
		spec.NoNewPrivs = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	}
	spec.Mounts = append(spec.Mounts, mountSpec{Target: "/proc", Proc: true})
	for _, dev := range []string{"null", "zero", "full", "random", "urandom"} {
		spec.Mounts = append(spec.Mounts, mountSpec{Source: "/dev/" + dev, Target: "/dev/" + dev})
	}
	var volMounts []mountSpec
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return p, fmt.Errorf("volume mount %q has no volume", m.Name)
		}
		if m.SubPath != "" {
			if src, err = subPathSource(src, expand(m.SubPath, envMap)); err != nil {
				return p, fmt.Errorf("volume mount %q: %w", m.Name, err)
			}
		}
		volMounts = append(volMounts, mountSpec{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	// Parents before children: /etc/strata before /etc/strata/certs.
	sort.SliceStable(volMounts, func(i, j int) bool {
		return strings.Count(path.Clean(volMounts[i].Target), "/") < strings.Count(path.Clean(volMounts[j].Target), "/")
	})
	spec.Mounts = append(spec.Mounts, volMounts...)

	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return p, err
	}
	if err := os.WriteFile(p.spec, data, 0o600); err != nil {
		return p, err
	}
	if err := os.MkdirAll(filepath.Dir(p.log), 0o755); err != nil {
		return p, err
	}
	return p, nil
}

// subPathSource is what a volume mount with subPath binds: a file or
// directory of the volume (a Secret's key through its symlink, as
// prometheus-operator mounts web-config.yaml), or a directory made for it
// when there is none yet, as the kubelet does. Like the kubelet, it refuses
// a subPath that is absolute or climbs out of the volume.
func subPathSource(volume, subPath string) (string, error) {
	if path.IsAbs(subPath) || slices.Contains(strings.Split(subPath, "/"), "..") {
		return "", fmt.Errorf("subPath %q must be a relative path inside the volume", subPath)
	}
	src := filepath.Join(volume, subPath)
	if _, err := os.Stat(src); err == nil {
		return src, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return src, os.MkdirAll(src, 0o755)
}

// sameGroup says whether a file belongs to group gid.
func sameGroup(st os.FileInfo, gid int) bool {
	s, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(s.Gid) == gid
}
