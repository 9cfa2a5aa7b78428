package controllers

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/strata-storage/strata/internal/builders"
)

// reconcileMetricsToken makes sure the Secret holding the token the
// tenant's pods require on /strata/metrics (and the ServiceMonitor
// presents) exists. It is generated once, owned by the Tenant, and never
// overwritten while it holds a token: one rotated by hand stays, and the
// engine picks it up without a restart. Only an emptied token is replaced,
// since pods could not start with it. The token is never logged or put in
// an Event.
func (r *TenantReconciler) reconcileMetricsToken(ctx context.Context, s *tenantScope) error {
	t := s.tenant
	name := builders.MetricsTokenSecretName(t.Name)
	sec := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: name}, sec)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the metrics token: %w", err)
	}
	if err == nil && len(bytes.TrimSpace(sec.Data[builders.MetricsTokenKey])) > 0 {
		return nil
	}
	gen, genErr := builders.NewMetricsToken(t, r.Config.Random)
	if genErr != nil {
		return genErr
	}
	if apierrors.IsNotFound(err) {
		if err := controllerutil.SetControllerReference(t, gen, r.Scheme); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, gen); err != nil {
			return fmt.Errorf("creating the metrics token: %w", err)
		}
		r.Recorder.Eventf(t, gen, corev1.EventTypeNormal, "MetricsTokenGenerated", "CreateSecret",
			"generated the token Prometheus presents to /strata/metrics in Secret %s", name)
		return nil
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[builders.MetricsTokenKey] = gen.Data[builders.MetricsTokenKey]
	if err := r.Client.Update(ctx, sec); err != nil {
		return fmt.Errorf("replacing the empty metrics token: %w", err)
	}
	r.Recorder.Eventf(t, sec, corev1.EventTypeWarning, "MetricsTokenGenerated", "UpdateSecret",
		"Secret %s held no token under %q: wrote a new one", name, builders.MetricsTokenKey)
	return nil
}
