package builders

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1 "github.com/strata-storage/strata/api/v1alpha1"
	"github.com/strata-storage/strata/engine/notifytargets"
)

// Paths inside strata containers. Credentials reach the engine as files
// (the *_FILE variables), never as arguments or plain environment values.
const (
	RootMountPath     = "/etc/strata/root"
	IAMMountPath      = "/etc/strata/iam"
	CertsMountPath    = "/etc/strata/certs"
	MetricsMountPath  = "/etc/strata/metrics"
	MetricsTokenFile  = MetricsMountPath + "/" + MetricsTokenKey
	TopologyMountPath = "/etc/strata/topology"
	TopologyFile      = TopologyMountPath + "/" + TopologyFileKey
	NotifyMountPath   = "/etc/strata/notify"

	EnvRootUserFile     = "STRATA_ROOT_USER_FILE"
	EnvRootPasswordFile = "STRATA_ROOT_PASSWORD_FILE"
	EnvIAMFile          = "STRATA_IAM_FILE"
	// EnvMemoryLimit is engine/memlimit.EnvLimit.
	EnvMemoryLimit = "STRATA_MEMORY_LIMIT"

	// AnnotationCredentialsHash on pod templates changes when the root keys
	// change, so pods restart with them (the engine reloads IAM users and
	// certificates by itself, but reads root keys at start).
	AnnotationCredentialsHash = "storage.strata.dev/credentials-hash"

	// RunAsUser is the uid of the distroless "nonroot" user.
	RunAsUser = 65532

	// HealthLive, HealthReady are the engine's probe paths.
	HealthLive  = "/strata/health/live"
	HealthReady = "/strata/health/ready"
)

// Engine is what every strata pod of a tenant shares: image, credentials,
// certificates.
type Engine struct {
	Image       string
	PullPolicy  corev1.PullPolicy
	PullSecrets []corev1.LocalObjectReference
	RootSecret  string
	IAMSecret   string
	TLSSecret   string // "" serves plain HTTP
	// MetricsTokenSecret holds the token /strata/metrics requires.
	MetricsTokenSecret string
	// EncryptionSecret holds the servers' encryption master keys.
	EncryptionSecret string
	// NotifyTargetsSecret holds the notification targets file, mounted
	// whether it exists or not ("": not mounted).
	NotifyTargetsSecret string
	CredentialsHash     string
}

// EngineFor derives the engine settings of a tenant.
func EngineFor(t *v1.Tenant, defaultImage, credentialsHash string) Engine {
	e := Engine{
		Image:      Image(t, defaultImage),
		PullPolicy: corev1.PullPolicy(t.Spec.ImagePullPolicy),
		RootSecret: RootSecretName(t),
		IAMSecret:  IAMSecretName(t.Name),
		TLSSecret:  TLSSecretName(t),
		// The engine re-reads the token when kubelet updates the mounted
		// Secret: rotating it needs no restart, so it is not hashed.
		MetricsTokenSecret: MetricsTokenSecretName(t.Name),
		// Re-read by the engine when kubelet updates the file: a rotation
		// needs no restart, so it is not hashed either.
		EncryptionSecret: EncryptionKeysSecretName(t),
		// The notification targets and replication remotes: mounted
		// always, even before the tenant has any (the operator writes an
		// empty list then; optional, so that a pod does not wait for the
		// Secret), and re-read by the engine when kubelet updates the
		// file, so declaring, changing or removing them rolls nothing.
		NotifyTargetsSecret: NotifyTargetsSecretName(t.Name),
		CredentialsHash:     credentialsHash,
	}
	if e.PullPolicy == "" {
		e.PullPolicy = corev1.PullIfNotPresent
	}
	for _, s := range t.Spec.ImagePullSecrets {
		e.PullSecrets = append(e.PullSecrets, corev1.LocalObjectReference{Name: s.Name})
	}
	return e
}

// args common to server and gateway after the subcommand's own.
func (e Engine) commonArgs() []string {
	args := []string{"--metrics-token-file", MetricsTokenFile}
	if e.TLSSecret != "" {
		args = append(args, "--certs-dir", CertsMountPath)
	}
	return args
}

func (e Engine) env() []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: EnvRootUserFile, Value: RootMountPath + "/" + AccessKeyKey},
		{Name: EnvRootPasswordFile, Value: RootMountPath + "/" + SecretKeyKey},
		{Name: EnvIAMFile, Value: IAMMountPath + "/" + IAMFileKey},
	}
	if e.NotifyTargetsSecret != "" {
		env = append(env, corev1.EnvVar{Name: notifytargets.EnvVar, Value: NotifyMountPath + "/" + NotifyTargetsFileKey})
	}
	return env
}

// tmpSizeLimit bounds the pod's writable /tmp. The engine writes nothing
// there (POST form uploads never spill: docs/security.md); the bound keeps
// it that way should anything try.
var tmpSizeLimit = resource.MustParse("64Mi")

// volumes and mounts for credentials, IAM, certificates and a writable tmp
// (the root filesystem is read-only).
func (e Engine) volumes() ([]corev1.Volume, []corev1.VolumeMount) {
	secret := func(name, secretName string, items ...string) corev1.Volume {
		src := &corev1.SecretVolumeSource{SecretName: secretName, DefaultMode: ptr.To[int32](0o440)}
		for _, k := range items {
			src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k})
		}
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: src}}
	}
	vols := []corev1.Volume{
		secret("root-credentials", e.RootSecret, AccessKeyKey, SecretKeyKey),
		secret("iam", e.IAMSecret),
		secret("metrics-token", e.MetricsTokenSecret, MetricsTokenKey),
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(tmpSizeLimit)}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "root-credentials", MountPath: RootMountPath, ReadOnly: true},
		{Name: "iam", MountPath: IAMMountPath, ReadOnly: true},
		{Name: "metrics-token", MountPath: MetricsMountPath, ReadOnly: true},
		{Name: "tmp", MountPath: "/tmp"},
	}
	if e.TLSSecret != "" {
		vols = append(vols, secret("certs", e.TLSSecret))
		mounts = append(mounts, corev1.VolumeMount{Name: "certs", MountPath: CertsMountPath, ReadOnly: true})
	}
	if e.NotifyTargetsSecret != "" {
		// Every key: the targets file and the CAs of replication remotes.
		v := secret("notify-targets", e.NotifyTargetsSecret)
		v.Secret.Optional = ptr.To(true)
		vols = append(vols, v)
		mounts = append(mounts, corev1.VolumeMount{Name: "notify-targets", MountPath: NotifyMountPath, ReadOnly: true})
	}
	return vols, mounts
}

func (e Engine) probe(path string, period int32) *corev1.Probe {
	scheme := corev1.URISchemeHTTP
	if e.TLSSecret != "" {
		scheme = corev1.URISchemeHTTPS
	}
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("s3"), Scheme: scheme,
		}},
		PeriodSeconds: period, TimeoutSeconds: 5, FailureThreshold: 3,
	}
}

// startupProbe holds liveness and readiness back until the engine
// answers /live: every second, for up to two minutes.
func (e Engine) startupProbe() *corev1.Probe {
	p := e.probe(HealthLive, 1)
	p.TimeoutSeconds, p.FailureThreshold = 1, 120
	return p
}

// restricted satisfies the restricted Pod Security Standard.
func podSecurity() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To[int64](RunAsUser),
		RunAsGroup:          ptr.To[int64](RunAsUser),
		FSGroup:             ptr.To[int64](RunAsUser),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// Sizing is what a pool's pods get where the pool's spec.resources names
// nothing: a CPU and memory request and a memory limit. No CPU limit: CFS
// throttling of a storage server stalls every request it serves, while a
// request already shares CPU fairly under contention.
type Sizing struct {
	CPURequest, MemoryRequest, MemoryLimit resource.Quantity
}

var (
	// ServerSizing: a server's memory is mostly its requests' buffers, bounded
	// from the limit (docs/engine.md, "Memory"); 4 GiB lets 150 requests
	// move large objects at once.
	ServerSizing = Sizing{CPURequest: resource.MustParse("1"), MemoryRequest: resource.MustParse("2Gi"), MemoryLimit: resource.MustParse("4Gi")}
	// GatewaySizing: a gateway sends files from the page cache and copies
	// bodies through small buffers.
	GatewaySizing = Sizing{CPURequest: resource.MustParse("500m"), MemoryRequest: resource.MustParse("512Mi"), MemoryLimit: resource.MustParse("2Gi")}
)

// withDefaults fills what r leaves out from d: a request of a resource
// that has neither request nor limit (the API server copies a limit
// given alone into the request), and the memory limit, at least the
// memory request.
func withDefaults(r corev1.ResourceRequirements, d Sizing) corev1.ResourceRequirements {
	out := *r.DeepCopy()
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = corev1.ResourceList{}
	}
	for name, q := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: d.CPURequest, corev1.ResourceMemory: d.MemoryRequest} {
		_, req := out.Requests[name]
		_, lim := out.Limits[name]
		if !req && !lim {
			out.Requests[name] = q
		}
	}
	if _, ok := out.Limits[corev1.ResourceMemory]; !ok {
		limit := d.MemoryLimit
		if req := out.Requests[corev1.ResourceMemory]; req.Cmp(limit) > 0 {
			limit = req
		}
		out.Limits[corev1.ResourceMemory] = limit
	}
	return out
}

// memoryLimitEnv passes the container's memory limit to the engine, which
// sizes its Go runtime and its large requests from it (memlimit).
func memoryLimitEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: EnvMemoryLimit, ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
		ContainerName: "strata", Resource: "limits.memory", Divisor: resource.MustParse("1"),
	}}}
}

// container is the strata container with the arguments of one mode.
func (e Engine) container(args []string, extraMounts []corev1.VolumeMount, placement v1.PodPlacement, sizing Sizing) corev1.Container {
	_, mounts := e.volumes()
	return corev1.Container{
		Name:            "strata",
		Image:           e.Image,
		ImagePullPolicy: e.PullPolicy,
		Args:            append(args, e.commonArgs()...),
		Env:             append(e.env(), memoryLimitEnv()),
		Ports:           []corev1.ContainerPort{{Name: "s3", ContainerPort: S3Port, Protocol: corev1.ProtocolTCP}},
		VolumeMounts:    append(mounts, extraMounts...),
		Resources:       withDefaults(placement.Resources, sizing),
		// Until the engine listens, its start is looked at every second
		// (for up to two minutes: opening drives, meeting its peers),
		// and the first readiness probe follows at once: a restarted
		// server serves again within a second of its listener, not up to
		// a readiness period later.
		StartupProbe:   e.startupProbe(),
		LivenessProbe:  e.probe(HealthLive, 10),
		ReadinessProbe: e.probe(HealthReady, 5),
		// No preStop: on SIGTERM the engine reports not ready and keeps
		// serving for --shutdown-delay (5 s) while endpoints drop the
		// pod, then drains; a preStop sleep before it only doubled that.
		SecurityContext: containerSecurity(),
	}
}

func (e Engine) podAnnotations() map[string]string {
	if e.CredentialsHash == "" {
		return nil
	}
	return map[string]string{AnnotationCredentialsHash: e.CredentialsHash}
}
