package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/utils/ptr"
)

// provisionerName is the external provisioner of the harness's classes.
const provisionerName = "localcluster.strata.dev/directory"

// Annotations the scheduler and the PV controller use with external
// provisioners.
const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// storageClasses are the classes the harness provides: node-local classes
// (WaitForFirstConsumer, like a local-volume or NVMe CSI driver; the names
// the samples use) and a shared ReadWriteMany class standing in for CephFS
// or NFS (every "node" is this machine, so one directory is shared for real).
func storageClasses() []*storagev1.StorageClass {
	local := func(name string) *storagev1.StorageClass {
		return &storagev1.StorageClass{
			ObjectMeta:        metav1.ObjectMeta{Name: name},
			Provisioner:       provisionerName,
			ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
			VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
		}
	}
	shared := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "cephfs"},
		Provisioner:       provisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		Parameters:        map[string]string{"shared": "true"},
	}
	return []*storagev1.StorageClass{local("nvme-local"), local("array-a-luns"), local("array-b-luns"), shared}
}

// provisioner creates a directory-backed PersistentVolume for every claim of
// its classes: a `local` volume pinned to the node the scheduler selected
// for WaitForFirstConsumer classes, one any node may mount for the shared
// class.
// It deletes the directory and the volume once a claim is gone and the
// volume is Released. Binding is left to the PV controller.
type provisioner struct {
	log     *slog.Logger
	cs      kubernetes.Interface
	root    string
	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
}

func (p *provisioner) sync(ctx context.Context) {
	claims, err := p.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, c := range claims {
		if c.Spec.VolumeName != "" || c.Status.Phase != corev1.ClaimPending || c.DeletionTimestamp != nil {
			continue
		}
		if err := p.provision(ctx, c); err != nil {
			p.log.Warn("provisioning failed", "claim", c.Namespace+"/"+c.Name, "error", err)
		}
	}
	vols, err := p.volumes.List(labels.Everything())
	if err != nil {
		return
	}
	for _, v := range vols {
		if v.Annotations[annProvisionedBy] != provisionerName || v.Status.Phase != corev1.VolumeReleased ||
			v.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			continue
		}
		if err := os.RemoveAll(p.volumeDir(v.Name)); err != nil {
			p.log.Warn("removing volume directory", "volume", v.Name, "error", err)
			continue
		}
		if err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			p.log.Warn("deleting volume", "volume", v.Name, "error", err)
		}
	}
}

func (p *provisioner) volumeDir(pv string) string { return filepath.Join(p.root, pv) }

func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	if c.Spec.StorageClassName == nil {
		return nil
	}
	class, err := p.classes.Get(*c.Spec.StorageClassName)
	if err != nil || class.Provisioner != provisionerName {
		return nil //nolint:nilerr // not ours, or the class is not there yet
	}
	shared := class.Parameters["shared"] == "true"
	node := c.Annotations[annSelectedNode]
	waitForConsumer := class.VolumeBindingMode != nil && *class.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
	if waitForConsumer && node == "" {
		return nil // the scheduler has not chosen a node yet
	}
	name := "pvc-" + string(c.UID)
	if _, err := p.volumes.Get(name); err == nil {
		return nil
	}
	dir := p.volumeDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{annProvisionedBy: provisionerName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: ptr.Deref(class.ReclaimPolicy, corev1.PersistentVolumeReclaimDelete),
			StorageClassName:              class.Name,
			VolumeMode:                    ptr.To(corev1.PersistentVolumeFilesystem),
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			},
		},
	}
	// A local volume, so the kubelet applies the pods' fsGroup to it; a
	// shared one (every node is this machine, so the directory really is
	// shared) may be mounted on any node.
	pv.Spec.Local = &corev1.LocalVolumeSource{Path: dir}
	nodes := corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpExists}
	if !shared {
		if node == "" {
			return fmt.Errorf("local volume for %s/%s without a selected node", c.Namespace, c.Name)
		}
		nodes = corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	}
	pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{nodes}}},
	}}
	if _, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name, "node", node, "path", dir)
	return nil
}

// ensureStorageClasses creates the harness's classes.
func ensureStorageClasses(ctx context.Context, cs kubernetes.Interface) error {
	for _, sc := range storageClasses() {
		if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("storage class %s: %w", sc.Name, err)
		}
	}
	return nil
}
