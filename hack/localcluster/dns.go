package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// clusterDomain is the DNS suffix of Services and pods.
const clusterDomain = "cluster.local"

// hostsHeader starts every hosts file the harness writes.
const hostsHeader = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// clusterRecords renders the cluster's DNS as hosts-file lines, the way
// cluster DNS answers: a ClusterIP Service's names resolve to its ClusterIP;
// a headless Service's name to its ready endpoints; `<hostname>.<service>`
// to an endpoint that carries a hostname (StatefulSet pods behind their
// governing Service). "Ready" is the EndpointSlice's condition, which the
// endpoint-slice controller sets for not-ready pods too when the Service
// publishes not-ready addresses.
func clusterRecords(services []*corev1.Service, slices []*discoveryv1.EndpointSlice) string {
	type rec struct{ ip, name string }
	var recs []rec
	bySvc := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range slices {
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		bySvc[s.Namespace+"/"+svc] = append(bySvc[s.Namespace+"/"+svc], s)
	}
	for _, svc := range services {
		fqdn := fmt.Sprintf("%s.%s.svc.%s", svc.Name, svc.Namespace, clusterDomain)
		switch ip := svc.Spec.ClusterIP; {
		case ip == "":
			continue
		case ip != corev1.ClusterIPNone:
			recs = append(recs, rec{ip, fqdn})
			// What cluster DNS resolves through the pods' search path
			// (svc.cluster.local): <service>.<namespace>.svc and
			// <service>.<namespace>.
			for _, short := range shortNames(svc) {
				recs = append(recs, rec{ip, short})
			}
			continue
		}
		for _, s := range bySvc[svc.Namespace+"/"+svc.Name] {
			if s.AddressType != discoveryv1.AddressTypeIPv4 {
				continue
			}
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
					continue
				}
				for _, a := range ep.Addresses {
					recs = append(recs, rec{a, fqdn})
					for _, short := range shortNames(svc) {
						recs = append(recs, rec{a, short})
					}
					if ep.Hostname != nil && *ep.Hostname != "" {
						recs = append(recs, rec{a, *ep.Hostname + "." + fqdn})
					}
				}
			}
		}
	}
	sort.Slice(recs, func(i, j int) bool {
		if recs[i].name != recs[j].name {
			return recs[i].name < recs[j].name
		}
		return recs[i].ip < recs[j].ip
	})
	var b strings.Builder
	seen := map[rec]bool{}
	for _, r := range recs {
		if seen[r] {
			continue
		}
		seen[r] = true
		fmt.Fprintf(&b, "%s\t%s\n", r.ip, r.name)
	}
	return b.String()
}

// shortNames are a Service's names other than its FQDN that resolve in
// every namespace.
func shortNames(svc *corev1.Service) []string {
	return []string{svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace}
}

// nodeRecords names the Nodes (the API server reaches their log servers
// by host name first).
func nodeRecords(nodes int) string {
	var b strings.Builder
	for n := 1; n <= nodes; n++ {
		fmt.Fprintf(&b, "%s\t%s\n", nodeIP(n), nodeName(n))
	}
	return b.String()
}

// podHosts is a pod's /etc/hosts: localhost, the pod's own names (as the
// kubelet writes them), then the cluster's records.
func podHosts(ip, hostname, subdomain, namespace, records string) string {
	var b strings.Builder
	b.WriteString(hostsHeader)
	names := hostname
	if subdomain != "" {
		names = fmt.Sprintf("%s.%s.%s.svc.%s %s", hostname, subdomain, namespace, clusterDomain, hostname)
	}
	fmt.Fprintf(&b, "%s\t%s\n", ip, names)
	b.WriteString(records)
	return b.String()
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

// writeInPlace rewrites a file that is bind-mounted somewhere (a rename
// would leave the mount on the old inode). One write at offset 0 of the
// new content padded with newlines to at least the old length: the file
// never shrinks, so a concurrent reader never sees it empty or cut mid-line
// by a truncation.
func writeInPlace(path string, data []byte) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if strings.TrimRight(string(old), "\n") == strings.TrimRight(string(data), "\n") {
		return nil
	}
	if pad := len(old) - len(data); pad > 0 {
		data = append(data, []byte(strings.Repeat("\n", pad))...)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
