{{/* Helm's labels, on every object. */}}
{{- define "sluice.helmLabels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The labels of the controller's workload and Services: config/'s, and
Helm's. */}}
{{- define "sluice.labels" -}}
app.kubernetes.io/name: sluice-controller
{{ include "sluice.helmLabels" . }}
{{- end }}

{{- define "sluice.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
