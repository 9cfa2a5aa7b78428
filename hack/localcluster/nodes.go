package main

import "fmt"

// labelStorageRole marks the nodes that may hold storage pods (all of them
// here); the kubelets register with it.
const labelStorageRole = "node-role.strata.dev/storage"

// nodeName is the name of node n (1-based).
func nodeName(n int) string { return fmt.Sprintf("node-%d", n) }

// zoneOf spreads nodes over two zones, so zone-level failure domains exist.
func zoneOf(n int) string { return fmt.Sprintf("zone-%c", 'a'+(n-1)%2) }
