{{/* The release's base name: the release name, with the chart name unless it already holds it. */}}
{{- define "cluster-gateway.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The manager's Deployment, ServiceAccount, RBAC and webhook Service. */}}
{{- define "cluster-gateway.manager" -}}
{{- printf "%s-addon-manager" (include "cluster-gateway.fullname" .) -}}
{{- end -}}

{{- define "cluster-gateway.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.registry -}}
{{- printf "%s/%s:%s" .Values.image.registry .Values.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "cluster-gateway.labels" -}}
app.kubernetes.io/part-of: cluster-gateway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "cluster-gateway.managerSelector" -}}
app.kubernetes.io/name: {{ include "cluster-gateway.manager" . }}
app.kubernetes.io/component: addon-manager
{{- end -}}

{{/* namespace/name of every Placement the ClusterManagementAddOn installs through. */}}
{{- define "cluster-gateway.placements" -}}
{{- $refs := list -}}
{{- range .Values.addon.placements -}}
{{- $refs = append $refs (printf "%s/%s" (.namespace | default $.Release.Namespace) .name) -}}
{{- end -}}
{{- if .Values.addon.everyCluster.enabled -}}
{{- $refs = append $refs (printf "%s/%s" .Release.Namespace .Values.addon.everyCluster.placementName) -}}
{{- end -}}
{{- join "," $refs -}}
{{- end -}}

{{/* The gateway's flags from the values; the manager adds the ones it owns (port, certificate, namespace). */}}
{{- define "cluster-gateway.gatewayArgs" -}}
{{- $g := .Values.gateway -}}
{{- $args := list
  (printf "--log-level=%s" $g.logLevel)
  (printf "--agent-tunnels=%t" $g.agentTunnels)
  (printf "--ocm-integration=%t" $g.ocmIntegration)
  (printf "--feature-gates=HealthinessCheck=%t" $g.healthCheck.enabled)
  (printf "--health-check-interval=%d" (int $g.healthCheck.intervalSeconds))
  (printf "--reject-unhealthy=%t" $g.healthCheck.rejectUnhealthy)
-}}
{{- concat $args $g.extraArgs | toJson -}}
{{- end -}}

{{/* Refuses contradictory values with a message that says what to change. */}}
{{- define "cluster-gateway.validate" -}}
{{- $placements := include "cluster-gateway.placements" . -}}
{{- if and (eq .Values.addon.installStrategy "Placements") (not $placements) -}}
{{- fail "addon.installStrategy Placements needs addon.placements or addon.everyCluster.enabled: true" -}}
{{- end -}}
{{- if and (eq .Values.addon.installStrategy "Manual") $placements -}}
{{- fail "addon.placements and addon.everyCluster apply with addon.installStrategy Placements only; set it, or remove them" -}}
{{- end -}}
{{- if and .Values.gateway.serviceExternalName (not .Values.gateway.hostPort) -}}
{{- fail "gateway.serviceExternalName needs gateway.hostPort: the apiserver reaches the gateway on that host and port" -}}
{{- end -}}
{{- $cert := .Values.gateway.certificate -}}
{{- if gt (int64 $cert.validitySeconds) (int64 $cert.caValiditySeconds) -}}
{{- fail (printf "gateway.certificate.validitySeconds (%d) must not be longer than gateway.certificate.caValiditySeconds (%d)" (int64 $cert.validitySeconds) (int64 $cert.caValiditySeconds)) -}}
{{- end -}}
{{- end -}}
