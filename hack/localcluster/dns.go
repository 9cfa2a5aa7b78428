package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// clusterDomain is the DNS suffix of Services and pods.
const clusterDomain = "cluster.local"

// useClusterDNS points name lookups of the cluster namespace's own
// processes (the operator, the control plane) at the cluster DNS, as a
// pod's resolv.conf does, and gives them a hosts file of their own: bind
// mounts over /etc in the cluster's mount namespace, which the host never
// sees.
func useClusterDNS(state string) error {
	files := map[string]string{
		"/etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"/etc/resolv.conf": fmt.Sprintf("nameserver %s\nsearch default.svc.%[2]s svc.%[2]s %[2]s\noptions ndots:5\n",
			nodeNetBridgeAddr, clusterDomain),
	}
	for target, content := range files {
		src := filepath.Join(state, filepath.Base(target))
		if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting %s on %s: %w", src, target, err)
		}
	}
	return nil
}

// writeFileAtomic replaces path by renaming a complete temporary file over
// it, so readers see the old or the new content, never a part.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
