{{/* Names and labels. */}}
{{- define "breakglass.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "breakglass.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "breakglass.labels" -}}
{{ include "breakglass.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: tower-breakglass
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "breakglass.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The server's username in this cluster (what the RBAC binds and policies render names). */}}
{{- define "breakglass.identity" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.serviceAccount.name }}
{{- end -}}

{{/*
Refuses values that cannot work, with the fix. Included by the Deployment, so every render
checks them.
*/}}
{{- define "breakglass.validate" -}}
{{- $v := .Values -}}
{{- if not (has $v.database.engine (list "sqlite" "postgres")) -}}
{{- fail (printf "database.engine: must be sqlite or postgres, got %q" $v.database.engine) -}}
{{- end -}}
{{- if and (eq $v.database.engine "postgres") (not $v.database.existingSecret) -}}
{{- fail "database.existingSecret: database.engine=postgres needs the Secret holding the database URL (key database.key)" -}}
{{- end -}}
{{- if gt (int $v.replicaCount) 1 -}}
{{- if ne $v.database.engine "postgres" -}}
{{- fail (printf "replicaCount: %d replicas need database.engine=postgres; SQLite is one file for one server (set replicaCount: 1, or move to PostgreSQL)" (int $v.replicaCount)) -}}
{{- end -}}
{{- if not $v.recordings.s3.endpoint -}}
{{- fail "recordings.s3.endpoint: several replicas need the recordings bucket (each replica's data directory is its own)" -}}
{{- end -}}
{{- if $v.persistence.enabled -}}
{{- fail "persistence.enabled: several replicas cannot share one ReadWriteOnce volume; on PostgreSQL with a bucket the data directory needs none (persistence.enabled=false)" -}}
{{- end -}}
{{- if not $v.cookieKey.existingSecret -}}
{{- fail "cookieKey.existingSecret: several replicas must sign cookies with one key (a Secret with at least 64 random bytes)" -}}
{{- end -}}
{{- end -}}
{{- if and (not $v.persistence.enabled) (eq $v.database.engine "sqlite") -}}
{{- fail "persistence.enabled: SQLite keeps every session in the data directory; enable persistence or use database.engine=postgres" -}}
{{- end -}}
{{- if and $v.recordings.s3.endpoint (not $v.recordings.s3.existingSecret) -}}
{{- fail "recordings.s3.existingSecret: the bucket needs the Secret with the server's access key pair" -}}
{{- end -}}
{{- if and $v.ingress.enabled (not $v.ingress.tlsSecretName) (not $v.ingress.allowPlainHttp) -}}
{{- fail "ingress.tlsSecretName: the Ingress would serve sign-in cookies and terminals over plain http; name the Secret with the host's certificate, or set ingress.allowPlainHttp=true where TLS ends before the Ingress" -}}
{{- end -}}
{{- if $v.rbac.create -}}
{{- $policy := lookup "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicy" "" "tower-breakglass-grant" -}}
{{- $binding := lookup "admissionregistration.k8s.io/v1" "ValidatingAdmissionPolicyBinding" "" "tower-breakglass-grant" -}}
{{- if not (or $v.rbac.admissionPoliciesAppliedSeparately (and $policy $binding)) -}}
{{- fail "rbac.create: the chart would install the ClusterRole tower-breakglass-binder, which lets the server create RoleBindings of the debug roles in every namespace; only the admission policy tower-breakglass-grant narrows that to well-formed grants, and it is not in this cluster. Apply the admission policies first (`breakglass-server policies apply --cluster ENV`, or `breakglass-server policies render --cluster ENV | kubectl apply -f -`), or, where they are applied by other means, say so with rbac.admissionPoliciesAppliedSeparately=true" -}}
{{- end -}}
{{- end -}}
{{- if $v.networkPolicy.enabled -}}
{{- $egress := $v.networkPolicy.egress -}}
{{- if not $egress.apiServers -}}
{{- fail "networkPolicy.egress.apiServers: the NetworkPolicy would cut the server off from the Kubernetes API; list each cluster's API server address (this one's: `kubectl get endpoints kubernetes -n default`) as {cidr, ports}, or set networkPolicy.enabled=false" -}}
{{- end -}}
{{- if and (eq $v.database.engine "postgres") (not $egress.database) -}}
{{- fail "networkPolicy.egress.database: database.engine=postgres, and the NetworkPolicy would cut the server off from it; list the database's address as {cidr, ports}" -}}
{{- end -}}
{{- if and $v.recordings.s3.endpoint (not $egress.bucket) -}}
{{- fail "networkPolicy.egress.bucket: recordings go to recordings.s3.endpoint, and the NetworkPolicy would cut the server off from it; list the bucket's addresses as {cidr, ports}" -}}
{{- end -}}
{{- if and (regexMatch "(?m)^\\s*\\[auth\\.oidc\\]" $v.config) (not $egress.provider) -}}
{{- fail "networkPolicy.egress.provider: config signs people in with [auth.oidc], and the NetworkPolicy would cut the server off from the provider; list its address as {cidr, ports}" -}}
{{- end -}}
{{- end -}}
{{- range $key := list "server_namespace" "listen" "data_dir" "static_dir" "database_url" "session_secret" -}}
{{- if regexMatch (printf "(?m)^\\s*%s\\s*=" $key) $v.config -}}
{{- fail (printf "config: `%s` is set by the chart (see values.yaml), remove it from config" $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
