package builders

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
)

// S3Service is the tenant's client-facing Service over its server pods, as
// spec.expose asks.
func S3Service(t *v1.Tenant) *corev1.Service {
	typ := corev1.ServiceType(t.Spec.Expose.Type)
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: S3ServiceName(t.Name), Namespace: t.Namespace,
			Labels:      merge(TenantLabels(t.Name), map[string]string{LabelComponent: ComponentServer, LabelMetrics: "true"}),
			Annotations: t.Spec.Expose.Annotations,
		},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: ServerSelector(t.Name),
			Ports:    append([]corev1.ServicePort{s3ServicePort(t)}, consoleServicePort(t)...),
		},
	}
}

// consoleServicePort is the console's port of the tenant's Service, when
// spec.console enables it.
func consoleServicePort(t *v1.Tenant) []corev1.ServicePort {
	if !t.Spec.Console.Enabled {
		return nil
	}
	return []corev1.ServicePort{{Name: "console", Protocol: corev1.ProtocolTCP, Port: ConsolePort, TargetPort: intstr.FromInt32(ConsolePort)}}
}

// consoleContainerPort is the console's port of a strata container, when
// spec.console enables it.
func consoleContainerPort(t *v1.Tenant) []corev1.ContainerPort {
	if !t.Spec.Console.Enabled {
		return nil
	}
	return []corev1.ContainerPort{{Name: "console", ContainerPort: ConsolePort, Protocol: corev1.ProtocolTCP}}
}

// ConsoleArgs are the strata server and gateway flags of spec.console (none when the
// console is off).
func ConsoleArgs(t *v1.Tenant) []string {
	c := t.Spec.Console
	if !c.Enabled {
		return nil
	}
	args := []string{"--console-address", fmt.Sprintf(":%d", ConsolePort)}
	if c.SessionTTL != "" {
		args = append(args, "--console-session-ttl", c.SessionTTL)
	}
	if c.PublicS3URL != "" {
		args = append(args, "--console-s3-url", c.PublicS3URL)
	} else {
		// Links name the console's host with the port S3 has there.
		args = append(args, "--console-s3-port", strconv.Itoa(int(ServicePort(t))))
	}
	if c.PrometheusURL != "" {
		// The ServiceMonitor labels the tenant's series with its name;
		// Prometheus adds the namespace of the target.
		args = append(args, "--console-prometheus-url", c.PrometheusURL,
			"--console-prometheus-selector", fmt.Sprintf(`%s=%q,namespace=%q`, LabelTenantTarget, t.Name, t.Namespace))
	}
	return args
}

// ConsoleOIDCMountPath holds the console's OIDC client secret.
const ConsoleOIDCMountPath = "/etc/strata/console-oidc"

// ConsoleOIDC is a server's single sign-on flags and the volume holding
// the client's secret as a file (none without spec.console.oidc;
// gateways have no STS to sign in through).
func ConsoleOIDC(t *v1.Tenant) ([]string, []corev1.Volume, []corev1.VolumeMount) {
	o := t.Spec.Console.OIDC
	if !t.Spec.Console.Enabled || o == nil {
		return nil, nil, nil
	}
	args := []string{"--console-oidc-issuer", o.IssuerURL, "--console-oidc-client-id", o.ClientID, "--console-oidc-role-arn", o.RoleARN}
	if len(o.Scopes) > 0 {
		args = append(args, "--console-oidc-scopes", strings.Join(o.Scopes, " "))
	}
	if o.RedirectURL != "" {
		args = append(args, "--console-oidc-redirect-url", o.RedirectURL)
	}
	if o.ClientSecretRef == nil {
		return args, nil, nil
	}
	args = append(args, "--console-oidc-client-secret-file", ConsoleOIDCMountPath+"/"+v1.ConsoleOIDCSecretKey)
	return args, []corev1.Volume{{Name: "console-oidc", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: o.ClientSecretRef.Name, DefaultMode: ptr.To[int32](0o440),
			Items: []corev1.KeyToPath{{Key: v1.ConsoleOIDCSecretKey, Path: v1.ConsoleOIDCSecretKey}},
		}}}},
		[]corev1.VolumeMount{{Name: "console-oidc", MountPath: ConsoleOIDCMountPath, ReadOnly: true}}
}

func s3ServicePort(t *v1.Tenant) corev1.ServicePort {
	name := "http"
	if TLSEnabled(t) {
		name = "https"
	}
	return corev1.ServicePort{
		Name: name, Protocol: corev1.ProtocolTCP, Port: ServicePort(t), TargetPort: intstr.FromInt32(S3Port),
	}
}

// HeadlessService gives every server pod the DNS name the topology file's
// endpoints use. It publishes pods before they are ready: servers must
// reach each other to form write quorum and become ready.
func HeadlessService(t *v1.Tenant) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: HeadlessServiceName(t.Name), Namespace: t.Namespace,
			Labels: merge(TenantLabels(t.Name), map[string]string{LabelComponent: ComponentServer}),
		},
		Spec: corev1.ServiceSpec{
			Type:                     corev1.ServiceTypeClusterIP,
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 ServerSelector(t.Name),
			Ports: []corev1.ServicePort{{
				Name: "s3", Protocol: corev1.ProtocolTCP, Port: S3Port, TargetPort: intstr.FromInt32(S3Port),
			}},
		},
	}
}

// GatewayService is a GatewayPool's own Service, typed and annotated like the
// tenant's.
func GatewayService(t *v1.Tenant, g *v1.GatewayPool) *corev1.Service {
	typ := corev1.ServiceType(t.Spec.Expose.Type)
	if typ == "" {
		typ = corev1.ServiceTypeClusterIP
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayName(t.Name, g.Name), Namespace: g.Namespace,
			Labels:      merge(TenantLabels(t.Name), map[string]string{LabelComponent: ComponentGateway, LabelPool: g.Name, LabelMetrics: "true"}),
			Annotations: t.Spec.Expose.Annotations,
		},
		Spec: corev1.ServiceSpec{
			Type:     typ,
			Selector: PoolSelector(t.Name, g.Name, ComponentGateway),
			Ports:    append([]corev1.ServicePort{s3ServicePort(t)}, consoleServicePort(t)...),
		},
	}
}
