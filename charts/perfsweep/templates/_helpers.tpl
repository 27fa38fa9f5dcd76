{{/* Chart name, overridable. */}}
{{- define "perfsweep.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped name of the operator's objects. */}}
{{- define "perfsweep.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "perfsweep.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "perfsweep.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: perfsweep
{{- end -}}

{{- define "perfsweep.selectorLabels" -}}
app.kubernetes.io/name: {{ include "perfsweep.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "perfsweep.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "perfsweep.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "perfsweep.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The namespaces the operator watches, with a Role in each: watch.namespaces, or the
release namespace by default; none (an empty list) with watch.allNamespaces, which uses
a ClusterRole instead. Returned as JSON for fromJsonArray.
*/}}
{{- define "perfsweep.watchedNamespaces" -}}
{{- if and .Values.watch.allNamespaces .Values.watch.namespaces -}}
{{- fail "watch.allNamespaces and watch.namespaces exclude each other: list the namespaces, or watch them all" -}}
{{- end -}}
{{- if .Values.watch.allNamespaces -}}
{{- list | toJson -}}
{{- else if .Values.watch.namespaces -}}
{{- .Values.watch.namespaces | toJson -}}
{{- else -}}
{{- list .Release.Namespace | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The operator instances: one watching every namespace (watch.allNamespaces), one for the
release namespace (the default), or one per listed namespace (the operator takes a
single --namespace). Each entry: name (Deployment), namespace (watched, "" for all),
lease (leader election Lease name). Returned as JSON for fromJson.
*/}}
{{- define "perfsweep.instances" -}}
{{- $fullname := include "perfsweep.fullname" . -}}
{{- $lease := .Values.operator.leaderElection.leaseName -}}
{{- $instances := list -}}
{{- if .Values.watch.namespaces -}}
{{- range .Values.watch.namespaces -}}
{{- $instances = append $instances (dict "name" (printf "%s-%s" $fullname . | trunc 63 | trimSuffix "-") "namespace" . "lease" (printf "%s-%s" $lease . | trunc 63 | trimSuffix "-")) -}}
{{- end -}}
{{- else -}}
{{- $watched := include "perfsweep.watchedNamespaces" . | fromJsonArray -}}
{{- $instances = append $instances (dict "name" $fullname "namespace" (first $watched | default "") "lease" $lease) -}}
{{- end -}}
{{- dict "items" $instances | toJson -}}
{{- end -}}
