{{- define "strata-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strata-operator.labels" -}}
app.kubernetes.io/name: strata-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "strata-operator.selectorLabels" -}}
app.kubernetes.io/name: strata-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strata-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Where the webhook certificate comes from: "operator" (its own, the
default; also when an upgrade with --reuse-values carries values from a
chart that did not have the key) or "certManager".
*/}}
{{- define "strata-operator.webhookCertificates" -}}
{{- .Values.webhook.certificates | default "operator" -}}
{{- end -}}
