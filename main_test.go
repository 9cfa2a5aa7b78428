package main

import (
	"slices"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// TestWatchNamespaces: --watch-namespaces limits the caches to the listed
// namespaces, except the CSIStorageCapacity objects placement reads
// wherever CSI drivers publish them; without it every namespace is watched.
func TestWatchNamespaces(t *testing.T) {
	if got := splitNamespaces(" team-a, ,team-b,"); !slices.Equal(got, []string{"team-a", "team-b"}) {
		t.Fatalf("split: %v", got)
	}
	if o := cacheOptions(nil); o.DefaultNamespaces != nil {
		t.Fatalf("no list: namespaces %v", o.DefaultNamespaces)
	}
	o := cacheOptions([]string{"team-a", "team-b"})
	if len(o.DefaultNamespaces) != 2 {
		t.Fatalf("namespaces %v", o.DefaultNamespaces)
	}
	for obj, by := range o.ByObject {
		if _, ok := obj.(*storagev1.CSIStorageCapacity); ok {
			if _, all := by.Namespaces[cache.AllNamespaces]; !all {
				t.Fatalf("CSIStorageCapacity namespaces %v", by.Namespaces)
			}
			return
		}
	}
	t.Fatal("CSIStorageCapacity limited to the watched namespaces")
}
