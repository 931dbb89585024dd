{{/* Names, labels, images, the catalog, volumes and probes of every taskyard component. */}}

{{- define "taskyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "taskyard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Name of a component's objects: (dict "ctx" $ "component" "api") */}}
{{- define "taskyard.componentName" -}}
{{- printf "%s-%s" (include "taskyard.fullname" .ctx) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "taskyard.labels" -}}
app.kubernetes.io/name: {{ include "taskyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{ include "taskyard.commonLabels" . }}
{{- end }}

{{/* Labels of every object besides the selector labels. */}}
{{- define "taskyard.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taskyard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of a component: (dict "ctx" $ "component" "worker-summarizer") */}}
{{- define "taskyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskyard.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "taskyard.componentLabels" -}}
{{ include "taskyard.commonLabels" .ctx }}
{{ include "taskyard.selectorLabels" . }}
{{- end }}

{{/* Image reference: (dict "ctx" $ "image" .Values.api.image) */}}
{{- define "taskyard.image" -}}
{{- $tag := .image.tag | default .ctx.Values.image.tag | default .ctx.Chart.AppVersion -}}
{{- if hasPrefix "sha256:" $tag -}}
{{- printf "%s@%s" .image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end }}

{{- define "taskyard.serviceAccountName" -}}
{{- if .ctx.Values.serviceAccount.create -}}
{{ include "taskyard.componentName" . }}
{{- else -}}
default
{{- end -}}
{{- end }}

{{/* The catalog as given: values catalog.content, else the chart's copy. */}}
{{- define "taskyard.catalogSource" -}}
{{- if .Values.catalog.content -}}
{{ .Values.catalog.content }}
{{- else -}}
{{ .Files.Get "files/specialists.yaml" }}
{{- end -}}
{{- end }}

{{/* The specialist catalog's YAML text the services mount. With the operator, each entry of the `specialists`
     values list is in it too (its catalog fields, replacing a catalog entry of the same name): the services
     read their catalog from this file, so a Specialist rendered from values is routed to and its worker
     starts. Without them, the catalog text as given. */}}
{{- define "taskyard.catalogText" -}}
{{- if and .Values.operator.enabled .Values.specialists -}}
{{- $catalog := include "taskyard.catalogSource" . | fromYaml -}}
{{- if hasKey $catalog "Error" -}}
{{- fail (printf "catalog: not valid YAML: %s" $catalog.Error) -}}
{{- end -}}
{{- $managed := include "taskyard.operatorSpecialistNames" . | fromJsonArray -}}
{{- $entries := list -}}
{{- range $catalog.specialists -}}
{{- if not (has (toString .name) $managed) -}}
{{- $entries = append $entries . -}}
{{- end -}}
{{- end -}}
{{- range .Values.specialists -}}
{{- $entries = append $entries (omit . "scaling" "pod") -}}
{{- end -}}
{{- $_ := set $catalog "specialists" $entries -}}
{{ toYaml $catalog }}
{{- else -}}
{{ include "taskyard.catalogSource" . }}
{{- end -}}
{{- end }}

{{/* Names of the `specialists` values list (Specialist resources for the operator), as a JSON list. */}}
{{- define "taskyard.operatorSpecialistNames" -}}
{{- $names := list -}}
{{- range .Values.specialists -}}
{{- if has (toString .name) $names -}}
{{- fail (printf "specialists: %s is listed twice" (toString .name)) -}}
{{- end -}}
{{- $names = append $names (toString .name) -}}
{{- end -}}
{{- if and $names (not .Values.operator.enabled) -}}
{{- fail "specialists: renders Specialist resources for the operator and needs operator.enabled (without the operator, list specialists in catalog.content and tune them under worker.specialists)" -}}
{{- end -}}
{{- toJson $names -}}
{{- end }}

{{/* The specialists whose workers the chart renders itself: the catalog's, less those the operator manages
     (never both for one name). */}}
{{- define "taskyard.valuesWorkerNames" -}}
{{- $managed := include "taskyard.operatorSpecialistNames" . | fromJsonArray -}}
{{- $names := list -}}
{{- /* With the kubernetes catalog source the catalog is the Specialist resources: the operator runs every
     worker, and a values-driven one would find no entry of its own there. */ -}}
{{- if ne .Values.catalog.source "kubernetes" -}}
{{- range include "taskyard.specialistNames" . | fromJsonArray -}}
{{- if not (has . $managed) -}}
{{- $names = append $names . -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $name, $_ := .Values.worker.specialists -}}
{{- if has $name $managed -}}
{{- fail (printf "worker.specialists.%s: %s is a Specialist of the operator (specialists list): set its scaling and pod there" $name $name) -}}
{{- end -}}
{{- end -}}
{{- toJson $names -}}
{{- end }}

{{/* The parsed catalog, as JSON (a template can only return text). */}}
{{- define "taskyard.catalog" -}}
{{- $catalog := include "taskyard.catalogText" . | fromYaml -}}
{{- if hasKey $catalog "Error" -}}
{{- fail (printf "catalog: not valid YAML: %s" $catalog.Error) -}}
{{- end -}}
{{- toJson $catalog -}}
{{- end }}

{{/* The specialists' names, as a JSON list. Each name goes into a KEDA query, so it must be a SpecialistName. */}}
{{- define "taskyard.specialistNames" -}}
{{- $catalog := include "taskyard.catalog" . | fromJson -}}
{{- $names := list -}}
{{- range $catalog.specialists -}}
{{- if not (regexMatch "^[a-z][a-z0-9-]{0,62}$" (toString .name)) -}}
{{- fail (printf "catalog: specialist name %q must match ^[a-z][a-z0-9-]{0,62}$" (toString .name)) -}}
{{- end -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- if not $names -}}
{{- fail "catalog: lists no specialists" -}}
{{- end -}}
{{- range $name, $_ := .Values.worker.specialists -}}
{{- if not (has $name $names) -}}
{{- fail (printf "worker.specialists.%s: not a specialist of the catalog (%s)" $name (join ", " $names)) -}}
{{- end -}}
{{- end -}}
{{- toJson $names -}}
{{- end }}

{{- define "taskyard.rabbitmqClusterName" -}}
{{ include "taskyard.componentName" (dict "ctx" . "component" "rabbitmq") }}
{{- end }}

{{- define "taskyard.postgresqlClusterName" -}}
{{ include "taskyard.componentName" (dict "ctx" . "component" "postgresql") }}
{{- end }}

{{- define "taskyard.postgresqlPoolerName" -}}
{{ include "taskyard.componentName" (dict "ctx" . "component" "postgresql-pooler") }}
{{- end }}

{{- define "taskyard.catalogVolume" -}}
- name: catalog
  configMap:
    name: {{ include "taskyard.componentName" (dict "ctx" . "component" "catalog") }}
{{- end }}

{{- define "taskyard.catalogVolumeMount" -}}
- name: catalog
  mountPath: {{ .Values.config.catalogMountPath }}
  readOnly: true
{{- end }}

{{- define "taskyard.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{- define "taskyard.tmpVolumeMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}

{{- define "taskyard.podSecurityContext" -}}
runAsNonRoot: true
{{ toYaml .Values.podSecurityContext }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Health probes on a named port: (dict "port" "health") */}}
{{- define "taskyard.probes" -}}
startupProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: 2
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /healthz, port: {{ .port }}}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet: {path: /readyz, port: {{ .port }}}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
{{- end }}

{{/* One specialist's catalog entry (dict "ctx" $ "name" NAME), as JSON: what its worker's pods are hashed on. */}}
{{- define "taskyard.specialistEntry" -}}
{{- $catalog := include "taskyard.catalog" .ctx | fromJson -}}
{{- $name := .name -}}
{{- range $catalog.specialists -}}
{{- if eq (toString .name) $name -}}
{{- toJson . -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The LLM egress ports of the NetworkPolicy: networkPolicy.llmEgressPorts plus the port llm.baseUrl names
     (explicitly, or its scheme's default), as a JSON list without duplicates. */}}
{{- define "taskyard.llmEgressPorts" -}}
{{- $ports := list -}}
{{- range .Values.networkPolicy.llmEgressPorts }}{{ $ports = append $ports (int .) }}{{ end -}}
{{- with .Values.llm.baseUrl -}}
{{- $url := urlParse . -}}
{{- $hostPort := splitList ":" $url.host -}}
{{- if gt (len $hostPort) 1 -}}
{{- $ports = append $ports (int (last $hostPort)) -}}
{{- else if eq $url.scheme "http" -}}
{{- $ports = append $ports 80 -}}
{{- else -}}
{{- $ports = append $ports 443 -}}
{{- end -}}
{{- end -}}
{{- $ports | uniq | toJson -}}
{{- end }}
