package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// AnnotationDesiredHash records, on every object the operator writes, a hash
// of what it wanted. Together with a semantic comparison it tells "the spec
// changed" (hash differs) from "someone edited the object" (live fields
// differ from desired ones) without fighting fields the API server or other
// controllers fill in.
const AnnotationDesiredHash = "storage.strata.dev/desired-hash"

type opResult string

const (
	opNone    opResult = ""
	opCreated opResult = "created"
	opUpdated opResult = "updated"
)

// kindOps says how to compare and merge one kind: `same` reports whether
// live already carries every field of desired; `merge` copies the fields the
// operator owns from desired onto live.
type kindOps[T client.Object] struct {
	same  func(live, desired T) bool
	merge func(live, desired T)
	// create, when set, adjusts desired just before it is created (after
	// the desired hash is taken): fields set once, then owned by others.
	create func(desired T)
}

// apply creates desired when it is missing, or updates the live object when
// the desired state changed or the live object drifted. It never writes
// when nothing changed, so an idle operator issues no API writes. owner, when
// set, becomes the controller owner (garbage collection and watches).
func apply[T client.Object](ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object, desired T, ops kindOps[T]) (opResult, error) {
	hash, err := hashOf(desired)
	if err != nil {
		return opNone, err
	}
	if owner != nil {
		if err := controllerutil.SetControllerReference(owner, desired, scheme); err != nil {
			return opNone, err
		}
	}
	live := desired.DeepCopyObject().(T)
	err = c.Get(ctx, client.ObjectKeyFromObject(desired), live)
	if apierrors.IsNotFound(err) {
		annotate(desired, hash)
		if ops.create != nil {
			ops.create(desired)
		}
		if err := c.Create(ctx, desired); err != nil {
			return opNone, fmt.Errorf("creating %T %s: %w", desired, desired.GetName(), err)
		}
		return opCreated, nil
	}
	if err != nil {
		return opNone, fmt.Errorf("reading %T %s: %w", desired, desired.GetName(), err)
	}
	if live.GetAnnotations()[AnnotationDesiredHash] == hash && ops.same(live, desired) &&
		subset(desired.GetLabels(), live.GetLabels()) && subset(desired.GetAnnotations(), live.GetAnnotations()) &&
		ownedBy(live, desired) {
		return opNone, nil
	}
	ops.merge(live, desired)
	live.SetLabels(union(live.GetLabels(), desired.GetLabels()))
	live.SetAnnotations(union(live.GetAnnotations(), desired.GetAnnotations()))
	annotate(live, hash)
	if owner != nil {
		if err := controllerutil.SetControllerReference(owner, live, scheme); err != nil {
			return opNone, err
		}
	}
	if err := c.Update(ctx, live); err != nil {
		return opNone, fmt.Errorf("updating %T %s: %w", desired, desired.GetName(), err)
	}
	return opUpdated, nil
}

func hashOf(obj client.Object) (string, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

func annotate(obj client.Object, hash string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[AnnotationDesiredHash] = hash
	obj.SetAnnotations(a)
}

func ownedBy(live, desired client.Object) bool {
	for _, want := range desired.GetOwnerReferences() {
		found := false
		for _, got := range live.GetOwnerReferences() {
			if got.UID == want.UID && got.Controller != nil && *got.Controller {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func subset(want, got map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

func union(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// derivative reports whether live carries every field desired sets, with
// the same value. It compares the JSON forms: fields desired leaves out
// (zero values, which the API server may default to something else) are
// ignored, lists must have the same length (so a removed item counts), and
// quantities compare in canonical form.
func derivative(desired, live any) bool {
	d, err1 := toJSONValue(desired)
	l, err2 := toJSONValue(live)
	if err1 != nil || err2 != nil {
		return equality.Semantic.DeepEqual(desired, live)
	}
	return jsonSubset(d, l)
}

func toJSONValue(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(data, &out)
}

func jsonSubset(desired, live any) bool {
	switch d := desired.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			if !jsonSubset(dv, l[k]) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(d) {
			return len(d) == 0 && live == nil
		}
		for i := range d {
			if !jsonSubset(d[i], l[i]) {
				return false
			}
		}
		return true
	default:
		return desired == live
	}
}
