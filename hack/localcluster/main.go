// Command localcluster runs a small Kubernetes cluster on one Linux machine
// without Docker: a real kube-apiserver, etcd, kube-controller-manager and
// kube-scheduler, and nodes that are real kubelets with containerd, runc,
// CNI and kube-proxy, each in namespaces of its own; CoreDNS is the cluster
// DNS, the images come from a registry the harness serves, and volumes from
// a local provisioner. The real operator (bin/manager) runs against it and a
// demo Tenant is applied, so `make demo` ends with an S3 endpoint on
// localhost.
//
//	localcluster up   [flags]   start in the background, wait, print how to use it
//	localcluster down [flags]   stop everything and remove the state directory
//	localcluster node down|up NODE [flags]   a node loses power / comes back
//
// The other subcommands (run, node-init) are the harness's own processes;
// docs/localcluster.md describes the whole.
package main

import (
	"fmt"
	"os"
)

const usage = `usage: localcluster <command> [flags]

commands:
  up      start the cluster in the background and wait for the demo Tenant
  down    stop the cluster and remove its state directory
  status  print how to use a running cluster
  node    'node down NODE' / 'node up NODE': a node loses power / comes back

'localcluster <command> -h' lists a command's flags. Needs root (namespaces,
mounts, veth pairs). docs/localcluster.md explains the harness.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = cmdUp(args)
	case "down":
		err = cmdDown(args)
	case "status":
		err = cmdStatus(args)
	case "node":
		err = cmdNode(args)
	case "run":
		err = cmdRun(args)
	case "node-init":
		err = cmdNodeInit(args)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "localcluster: unknown command %q\n\n%s", cmd, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "localcluster %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
