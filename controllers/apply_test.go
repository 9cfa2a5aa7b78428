package controllers

import (
	"cmp"
	"context"
	"maps"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

func TestDerivative(t *testing.T) {
	port := func(name string, p int32) corev1.ServicePort { return corev1.ServicePort{Name: name, Port: p} }
	cases := []struct {
		name          string
		desired, live any
		want          bool
	}{
		{"equal", port("s3", 9000), port("s3", 9000), true},
		{"fields desired leaves out are ignored",
			port("s3", 9000), corev1.ServicePort{Name: "s3", Port: 9000, Protocol: corev1.ProtocolTCP, NodePort: 30900}, true},
		{"a field set differently", port("s3", 9000), port("s3", 9001), false},
		{"a field desired sets is missing", port("s3", 9000), corev1.ServicePort{Port: 9000}, false},
		{"lists of the same items", []corev1.ServicePort{port("a", 1), port("b", 2)}, []corev1.ServicePort{port("a", 1), port("b", 2)}, true},
		{"a removed list item counts", []corev1.ServicePort{port("a", 1)}, []corev1.ServicePort{port("a", 1), port("b", 2)}, false},
		{"a missing list item counts", []corev1.ServicePort{port("a", 1), port("b", 2)}, []corev1.ServicePort{port("a", 1)}, false},
		{"list order counts", []corev1.ServicePort{port("a", 1), port("b", 2)}, []corev1.ServicePort{port("b", 2), port("a", 1)}, false},
		{"quantities compare in canonical form",
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1024Mi")},
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}, true},
		{"different quantities",
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}, false},
		{"extra map keys on live are ignored", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, true},
		{"a nil desired map is JSON null and matches only nil", map[string]string(nil), map[string]string{"a": "1"}, false},
		{"nil against nil", map[string]string(nil), map[string]string(nil), true},
		{"pointers compare by value", ptr.To[int32](3), ptr.To[int32](3), true},
		{"different pointed-to values", ptr.To[int32](3), ptr.To[int32](4), false},
		{"a nil desired pointer is JSON null and matches only nil", (*int32)(nil), ptr.To[int32](3), false},
		{"values JSON cannot encode fall back to semantic equality", math.Inf(1), math.Inf(1), true},
		{"values JSON cannot encode, different", math.Inf(1), math.Inf(-1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := derivative(tc.desired, tc.live); got != tc.want {
				t.Errorf("derivative(%v, %v) = %v, want %v", tc.desired, tc.live, got, tc.want)
			}
		})
	}
}

func TestJSONSubset(t *testing.T) {
	type obj = map[string]any
	type list = []any
	cases := []struct {
		name          string
		desired, live any
		want          bool
	}{
		{"equal scalars", "a", "a", true},
		{"different scalars", "a", "b", false},
		{"numbers", 1.0, 1.0, true},
		{"a scalar against nothing", "a", nil, false},
		{"null against a value", nil, "a", false},
		{"both null", nil, nil, true},
		{"a map is a subset", obj{"a": 1.0}, obj{"a": 1.0, "b": 2.0}, true},
		{"a map key is missing", obj{"a": 1.0, "c": 3.0}, obj{"a": 1.0}, false},
		{"a map value differs", obj{"a": 1.0}, obj{"a": 2.0}, false},
		{"an empty map against nothing", obj{}, nil, true},
		{"an empty map against a scalar", obj{}, "x", false},
		{"a map against a scalar", obj{"a": 1.0}, "x", false},
		{"nested maps", obj{"a": obj{"b": "x"}}, obj{"a": obj{"b": "x", "c": "y"}}, true},
		{"nested maps differ", obj{"a": obj{"b": "x"}}, obj{"a": obj{"b": "z"}}, false},
		{"lists itemwise subsets", list{obj{"a": 1.0}}, list{obj{"a": 1.0, "b": 2.0}}, true},
		{"lists of different length", list{"a"}, list{"a", "b"}, false},
		{"an item differs", list{"a", "b"}, list{"a", "c"}, false},
		{"an empty list against nothing", list{}, nil, true},
		{"an empty list against a list", list{}, list{"a"}, false},
		{"a list against a map", list{"a"}, obj{"a": "a"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := jsonSubset(tc.desired, tc.live); got != tc.want {
				t.Errorf("jsonSubset(%v, %v) = %v, want %v", tc.desired, tc.live, got, tc.want)
			}
		})
	}
}

func TestSubset(t *testing.T) {
	cases := []struct {
		name      string
		want, got map[string]string
		ok        bool
	}{
		{"nothing wanted", nil, map[string]string{"a": "1"}, true},
		{"nothing wanted, nothing there", nil, nil, true},
		{"equal", map[string]string{"a": "1"}, map[string]string{"a": "1"}, true},
		{"extra keys are someone else's", map[string]string{"a": "1"}, map[string]string{"a": "1", "b": "2"}, true},
		{"a key is missing", map[string]string{"a": "1", "c": "3"}, map[string]string{"a": "1"}, false},
		{"a value differs", map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{"nothing there", map[string]string{"a": "1"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := subset(tc.want, tc.got); got != tc.ok {
				t.Errorf("subset(%v, %v) = %v, want %v", tc.want, tc.got, got, tc.ok)
			}
		})
	}
}

func TestUnion(t *testing.T) {
	cases := []struct {
		name string
		a, b map[string]string
		want map[string]string
	}{
		{"both empty is nil", nil, map[string]string{}, nil},
		{"only the first", map[string]string{"a": "1"}, nil, map[string]string{"a": "1"}},
		{"only the second", nil, map[string]string{"b": "2"}, map[string]string{"b": "2"}},
		{"disjoint keys", map[string]string{"a": "1"}, map[string]string{"b": "2"}, map[string]string{"a": "1", "b": "2"}},
		{"the second wins", map[string]string{"a": "1", "c": "3"}, map[string]string{"a": "2"}, map[string]string{"a": "2", "c": "3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := maps.Clone(tc.a), maps.Clone(tc.b)
			got := union(a, b)
			if !maps.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("union(%v, %v) = %#v, want %#v", tc.a, tc.b, got, tc.want)
			}
			if !maps.Equal(a, tc.a) || !maps.Equal(b, tc.b) {
				t.Errorf("union changed its arguments: %v, %v", a, b)
			}
		})
	}
}

func TestHashOf(t *testing.T) {
	base := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: map[string]string{"a": "1"}},
			Data: map[string]string{"k": "v"}}
	}
	h0, err := hashOf(base())
	if err != nil {
		t.Fatal(err)
	}
	if len(h0) != 16 {
		t.Errorf("hash %q: want 16 hex digits", h0)
	}
	cases := []struct {
		name   string
		change func(*corev1.ConfigMap)
		same   bool
	}{
		{"the same object", func(*corev1.ConfigMap) {}, true},
		{"a map built in another order", func(c *corev1.ConfigMap) { c.Data = map[string]string{"k": "v"} }, true},
		{"data changed", func(c *corev1.ConfigMap) { c.Data["k"] = "w" }, false},
		{"a label changed", func(c *corev1.ConfigMap) { c.Labels["a"] = "2" }, false},
		{"an annotation added", func(c *corev1.ConfigMap) { c.Annotations = map[string]string{"x": "y"} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm := base()
			tc.change(cm)
			h, err := hashOf(cm)
			if err != nil {
				t.Fatal(err)
			}
			if (h == h0) != tc.same {
				t.Errorf("hash %s, base %s: want same=%v", h, h0, tc.same)
			}
		})
	}
}

func TestAnnotate(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        map[string]string
	}{
		{"no annotations yet", nil, map[string]string{AnnotationDesiredHash: "h"}},
		{"others are kept", map[string]string{"x": "y"}, map[string]string{"x": "y", AnnotationDesiredHash: "h"}},
		{"an old hash is replaced", map[string]string{AnnotationDesiredHash: "old"}, map[string]string{AnnotationDesiredHash: "h"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			annotate(cm, "h")
			if !maps.Equal(cm.Annotations, tc.want) {
				t.Errorf("annotations %v, want %v", cm.Annotations, tc.want)
			}
		})
	}
}

func TestOwnedBy(t *testing.T) {
	ref := func(uid string, controller *bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "o-" + uid, UID: types.UID(uid), Controller: controller}
	}
	yes, no := ptr.To(true), ptr.To(false)
	cases := []struct {
		name          string
		desired, live []metav1.OwnerReference
		want          bool
	}{
		{"no owner wanted", nil, []metav1.OwnerReference{ref("a", yes)}, true},
		{"controlled by the owner", []metav1.OwnerReference{ref("a", yes)}, []metav1.OwnerReference{ref("a", yes)}, true},
		{"other owners beside it", []metav1.OwnerReference{ref("a", yes)}, []metav1.OwnerReference{ref("b", nil), ref("a", yes)}, true},
		{"no owner at all", []metav1.OwnerReference{ref("a", yes)}, nil, false},
		{"owned but not controlled", []metav1.OwnerReference{ref("a", yes)}, []metav1.OwnerReference{ref("a", no)}, false},
		{"controller unset", []metav1.OwnerReference{ref("a", yes)}, []metav1.OwnerReference{ref("a", nil)}, false},
		{"controlled by another", []metav1.OwnerReference{ref("a", yes)}, []metav1.OwnerReference{ref("b", yes)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.desired}}
			l := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{OwnerReferences: tc.live}}
			if got := ownedBy(l, d); got != tc.want {
				t.Errorf("ownedBy = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestApply runs apply against the controller-runtime fake client and
// counts the writes: the point of the hash annotation is that a pass with
// nothing to do writes nothing. Whatever happened, the object ends up with
// the desired data and labels, the hash and its owner; labels and
// annotations of others stay.
func TestApply(t *testing.T) {
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
	desired := func() *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: map[string]string{"app": "strata"}},
			Data: map[string]string{"k": "v"}}
	}
	cases := []struct {
		name string
		// live edits the object a first apply created (nil: no object).
		live     func(*corev1.ConfigMap)
		desired  func(*corev1.ConfigMap)
		want     opResult
		wantData string
	}{
		{name: "missing: created", want: opCreated},
		{name: "unchanged: no write", live: func(*corev1.ConfigMap) {}, want: opNone},
		{name: "others' labels and annotations: no write", live: func(c *corev1.ConfigMap) {
			c.Labels["team"] = "x"
			c.Annotations["note"] = "y"
		}, want: opNone},
		{name: "spec changed: updated", live: func(*corev1.ConfigMap) {}, desired: func(c *corev1.ConfigMap) { c.Data["k"] = "w" },
			want: opUpdated, wantData: "w"},
		{name: "data edited by hand: restored", live: func(c *corev1.ConfigMap) { c.Data["k"] = "edited" }, want: opUpdated},
		{name: "label removed by hand: restored, others kept", live: func(c *corev1.ConfigMap) {
			delete(c.Labels, "app")
			c.Labels["team"] = "x"
			c.Annotations["note"] = "y"
		}, want: opUpdated},
		{name: "hash annotation lost: updated", live: func(c *corev1.ConfigMap) { delete(c.Annotations, AnnotationDesiredHash) }, want: opUpdated},
		{name: "owner reference lost: restored", live: func(c *corev1.ConfigMap) { c.OwnerReferences = nil }, want: opUpdated},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			base := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
			var before *corev1.ConfigMap
			if tc.live != nil {
				if _, err := apply(ctx, base, clientgoscheme.Scheme, owner, desired(), configMapOps); err != nil {
					t.Fatal(err)
				}
				before = desired()
				edit(t, base, before, tc.live)
			}
			c, writes := countWrites(base)
			d := desired()
			if tc.desired != nil {
				tc.desired(d)
			}
			op, err := apply(ctx, c, clientgoscheme.Scheme, owner, d, configMapOps)
			if err != nil {
				t.Fatal(err)
			}
			if op != tc.want || (*writes == 0) != (tc.want == opNone) {
				t.Errorf("apply: %q with %d write(s), want %q", op, *writes, tc.want)
			}
			got := &corev1.ConfigMap{}
			if err := base.Get(ctx, client.ObjectKeyFromObject(d), got); err != nil {
				t.Fatal(err)
			}
			if data := cmp.Or(tc.wantData, "v"); got.Data["k"] != data || got.Labels["app"] != "strata" ||
				got.Annotations[AnnotationDesiredHash] == "" || !metav1.IsControlledBy(got, owner) {
				t.Errorf("got %v %+v, want data %s, label app, the hash and the owner", got.Data, got.ObjectMeta, data)
			}
			if before != nil && (got.Labels["team"] != before.Labels["team"] || got.Annotations["note"] != before.Annotations["note"]) {
				t.Errorf("others' labels or annotations lost: %v %v", got.Labels, got.Annotations)
			}
		})
	}
}

// edit changes obj's live copy as someone else would.
func edit[T client.Object](t *testing.T, c client.Client, obj T, change func(T)) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	change(obj)
	if err := c.Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
}

// countWrites wraps c to count the creates and updates sent through it.
func countWrites(c client.WithWatch) (client.Client, *int) {
	writes := new(int)
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			*writes++
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			*writes++
			return c.Update(ctx, obj, opts...)
		},
	}), writes
}
