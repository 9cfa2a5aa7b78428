package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// readManifests reads YAML documents from files and directories (*.yaml,
// *.yml in name order; kustomization.yaml is skipped, its resources being
// files of the same directory).
func readManifests(paths []string) ([]*unstructured.Unstructured, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range entries {
			n := e.Name()
			yamlFile := strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")
			if e.IsDir() || n == "kustomization.yaml" || !yamlFile {
				continue
			}
			names = append(names, filepath.Join(p, n))
		}
		sort.Strings(names)
		files = append(files, names...)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			out = append(out, &u)
		}
	}
	return out, nil
}

// applyManifests server-side applies every document, in the default
// namespace unless one is given. A kind the API server does not know yet is
// retried for a while (CRDs just installed).
func applyManifests(ctx context.Context, c client.Client, paths []string) error {
	objs, err := readManifests(paths)
	if err != nil {
		return err
	}
	for _, u := range objs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := applyOne(ctx, c, u)
			if err == nil {
				break
			}
			if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) || time.Now().After(deadline) {
				return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

func applyOne(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	namespaced, err := c.IsObjectNamespaced(u)
	if err != nil {
		return err
	}
	if namespaced && u.GetNamespace() == "" {
		u.SetNamespace("default")
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("localcluster"), client.ForceOwnership)
}

// kicker coalesces change notifications: each kind of work runs at most
// once at a time and once more after the last kick, plus every few seconds.
type kicker struct {
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

func newKicker() *kicker { return &kicker{pending: map[string]bool{}, wake: make(chan struct{}, 1)} }

func (k *kicker) kick(which string) {
	k.mu.Lock()
	k.pending[which] = true
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *kicker) loop(ctx context.Context, work map[string]func()) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		case <-tick.C:
			k.mu.Lock()
			for w := range work {
				k.pending[w] = true
			}
			k.mu.Unlock()
		}
		// Let a burst of events settle into one pass.
		time.Sleep(50 * time.Millisecond)
		k.mu.Lock()
		todo := k.pending
		k.pending = map[string]bool{}
		k.mu.Unlock()
		for w := range todo {
			if f, ok := work[w]; ok {
				f()
			}
		}
	}
}
