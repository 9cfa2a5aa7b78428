{{/*
Names here follow the operator's (internal/builders/names.go): the chart
only points users at objects the operator creates, so they must agree.
*/}}

{{/* The Tenant's name: .Values.name, else the release name. */}}
{{- define "strata-tenant.name" -}}
{{- $name := default .Release.Name .Values.name -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" $name) -}}
{{- fail (printf "the Tenant would be named %q (the release name), which is not a DNS label: set name to lowercase letters, digits and '-'" $name) -}}
{{- end -}}
{{- if gt (len $name) 40 -}}
{{- fail (printf "the Tenant would be named %q (%d characters, the release name); Tenant names have at most 40: set name" $name (len $name)) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{- define "strata-tenant.labels" -}}
app.kubernetes.io/name: strata-tenant
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* tls.mode as the operator reads it: Operator when absent (CRD default). */}}
{{- define "strata-tenant.tlsMode" -}}
{{- $tls := .Values.tenant.tls | default dict -}}
{{- $tls.mode | default "Operator" -}}
{{- end -}}

{{- define "strata-tenant.scheme" -}}
{{- if eq (include "strata-tenant.tlsMode" .) "Disabled" }}http{{ else }}https{{ end -}}
{{- end -}}

{{/* The S3 Services' port: expose.port, else 443 with TLS and 80 without. */}}
{{- define "strata-tenant.port" -}}
{{- $expose := .Values.tenant.expose | default dict -}}
{{- if $expose.port }}{{ $expose.port }}{{ else if eq (include "strata-tenant.scheme" .) "https" }}443{{ else }}80{{ end -}}
{{- end -}}

{{/* The Secret with the root keys: the referenced one, else the generated one. */}}
{{- define "strata-tenant.rootSecret" -}}
{{- $creds := .Values.tenant.credentials | default dict -}}
{{- $ref := $creds.secretRef | default dict -}}
{{- $ref.name | default (printf "%s-root-credentials" (include "strata-tenant.name" .)) -}}
{{- end -}}

{{/*
The Secret whose ca.crt verifies the tenant's certificate: <name>-tls,
where the operator (mode Operator) and cert-manager (mode CertManager) put
the CA next to the serving certificate; with External, tests.caSecret
(empty: the system's CAs); none without TLS.
*/}}
{{- define "strata-tenant.caSecret" -}}
{{- $mode := include "strata-tenant.tlsMode" . -}}
{{- if or (eq $mode "Operator") (eq $mode "CertManager") -}}
{{- printf "%s-tls" (include "strata-tenant.name" .) -}}
{{- else if eq $mode "External" -}}
{{- .Values.tests.caSecret -}}
{{- end -}}
{{- end -}}

{{/* The engine image the selftest pods run. */}}
{{- define "strata-tenant.testImage" -}}
{{- if .Values.tests.image.tag -}}
{{- printf "%s:%s" .Values.tests.image.repository .Values.tests.image.tag -}}
{{- else if .Values.tenant.image -}}
{{- .Values.tenant.image -}}
{{- else -}}
{{- printf "%s:%s" .Values.tests.image.repository .Chart.AppVersion -}}
{{- end -}}
{{- end -}}

{{/*
Checks the schema cannot express: pool names unique across both kinds (a
ServerPool and a GatewayPool of one tenant share Service and PDB names),
StatefulSet names <tenant>-<pool>[-<domain>] within the 52 characters
Kubernetes allows (the operator's webhook says the same, but only once the
release is half applied), gateway Service names <tenant>-<pool> within 63.
*/}}
{{- define "strata-tenant.checkPools" -}}
{{- $tenant := include "strata-tenant.name" . -}}
{{- $seen := dict -}}
{{- range $kind, $pools := dict "serverPools" .Values.serverPools "gatewayPools" .Values.gatewayPools -}}
{{- range $pools -}}
{{- if hasKey $seen .name -}}
{{- fail (printf "pool name %q is used twice (%s and %s): pool names must be unique across serverPools and gatewayPools" .name (get $seen .name) $kind) -}}
{{- end -}}
{{- $_ := set $seen .name $kind -}}
{{- end -}}
{{- end -}}
{{- range .Values.serverPools -}}
{{- $longest := "" -}}
{{- $topology := .spec.topology | default dict -}}
{{- range $topology.domains | default list -}}
{{- if gt (len .name) (len $longest) }}{{ $longest = .name }}{{ end -}}
{{- end -}}
{{- $sts := printf "%s-%s" $tenant .name -}}
{{- if $longest }}{{ $sts = printf "%s-%s" $sts $longest }}{{ end -}}
{{- if gt (len $sts) 52 -}}
{{- fail (printf "ServerPool %q: its StatefulSet would be named %q (%d characters); Kubernetes allows 52: shorten the pool, tenant or domain names" .name $sts (len $sts)) -}}
{{- end -}}
{{- end -}}
{{- range .Values.gatewayPools -}}
{{- $svc := printf "%s-%s" $tenant .name -}}
{{- if gt (len $svc) 63 -}}
{{- fail (printf "GatewayPool %q: its Service would be named %q (%d characters); Kubernetes allows 63: shorten the pool or tenant name" .name $svc (len $svc)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
