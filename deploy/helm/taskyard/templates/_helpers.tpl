{{/* Names, labels, images and the shared environment of every taskyard component. */}}

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

{{/* The specialist catalog's YAML text: values catalog.content, else the chart's copy. */}}
{{- define "taskyard.catalogText" -}}
{{- if .Values.catalog.content -}}
{{ .Values.catalog.content }}
{{- else -}}
{{ .Files.Get "files/specialists.yaml" }}
{{- end -}}
{{- end }}

{{/* The specialists' names, as a JSON list (a template can only return text). */}}
{{- define "taskyard.specialistNames" -}}
{{- $catalog := include "taskyard.catalogText" . | fromYaml -}}
{{- if hasKey $catalog "Error" -}}
{{- fail (printf "catalog: not valid YAML: %s" $catalog.Error) -}}
{{- end -}}
{{- $names := list -}}
{{- range $catalog.specialists -}}
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

{{/* Connection env: broker and database URLs and the LLM key, only ever from Secrets. */}}
{{- define "taskyard.connectionEnv" -}}
{{- if .Values.rabbitmq.cluster.enabled }}
{{- $secret := printf "%s-default-user" (include "taskyard.rabbitmqClusterName" .) }}
- name: RABBITMQ_USERNAME
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: username}}
- name: RABBITMQ_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ $secret }}, key: password}}
- name: TASKYARD_AMQP_URL
  value: {{ printf "amqp://$(RABBITMQ_USERNAME):$(RABBITMQ_PASSWORD)@%s.%s.svc:5672/" (include "taskyard.rabbitmqClusterName" .) .Release.Namespace | quote }}
{{- else }}
- name: TASKYARD_AMQP_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.rabbitmq.external.existingSecret }}, key: {{ .Values.rabbitmq.external.urlKey }}}}
{{- end }}
{{- if .Values.postgresql.cluster.enabled }}
- name: TASKYARD_DB_URL
  valueFrom: {secretKeyRef: {name: {{ include "taskyard.postgresqlClusterName" . }}-app, key: uri}}
{{- else }}
- name: TASKYARD_DB_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.postgresql.external.existingSecret }}, key: {{ .Values.postgresql.external.urlKey }}}}
{{- end }}
{{- end }}

{{- define "taskyard.llmEnv" -}}
{{- if .Values.devllm.enabled }}
- name: TASKYARD_LLM_BASE_URL
  value: {{ printf "http://%s:%d/v1" (include "taskyard.componentName" (dict "ctx" . "component" "devllm")) (int .Values.devllm.port) | quote }}
- name: TASKYARD_LLM_API_KEY
  value: devllm-no-key
{{- else }}
{{- with .Values.llm.baseUrl }}
- name: TASKYARD_LLM_BASE_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.llm.existingSecret }}
- name: TASKYARD_LLM_API_KEY
  valueFrom: {secretKeyRef: {name: {{ . }}, key: {{ $.Values.llm.apiKeyKey }}}}
{{- end }}
{{- end }}
- name: TASKYARD_LLM_MODEL
  value: {{ .Values.llm.model | quote }}
{{- end }}

{{/* Shared settings of every service; extra maps last so a component may override a shared one. */}}
{{- define "taskyard.sharedEnv" -}}
- name: TASKYARD_AMQP_PREFIX
  value: {{ .Values.config.amqpPrefix | quote }}
- name: TASKYARD_AMQP_DELIVERY_LIMIT
  value: {{ .Values.config.deliveryLimit | quote }}
- name: TASKYARD_AMQP_MAX_LENGTH
  value: {{ .Values.config.maxLength | int64 | quote }}
- name: TASKYARD_DB_SCHEMA
  value: {{ .Values.config.dbSchema | quote }}
- name: TASKYARD_LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: TASKYARD_LOG_JSON
  value: {{ .Values.config.logJson | quote }}
{{- end }}

{{- define "taskyard.catalogEnv" -}}
- name: TASKYARD_CATALOG_PATH
  value: {{ printf "%s/specialists.yaml" .Values.config.catalogMountPath | quote }}
{{- end }}

{{- define "taskyard.healthEnv" -}}
- name: TASKYARD_HEALTH_HOST
  value: "0.0.0.0"
- name: TASKYARD_HEALTH_PORT
  value: {{ .port | quote }}
{{- end }}

{{/* NAME: value maps rendered as env entries, later maps overriding earlier ones. (list map1 map2 ...) */}}
{{- define "taskyard.extraEnv" -}}
{{- $merged := dict -}}
{{- range . -}}
{{- $merged = merge (deepCopy (. | default dict)) $merged -}}
{{- end -}}
{{- range $name := keys $merged | sortAlpha }}
- name: {{ $name }}
  value: {{ index $merged $name | toString | quote }}
{{- end }}
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

{{/* A worker's settings for one specialist: defaults of worker.autoscaling overlaid by its overrides. */}}
{{- define "taskyard.workerSpec" -}}
{{- $spec := omit (deepCopy .ctx.Values.worker.autoscaling) "enabled" -}}
{{- $_ := set $spec "enabled" true -}}
{{- $_ := set $spec "mode" "deployment" -}}
{{- $_ := set $spec "resources" (deepCopy .ctx.Values.worker.resources) -}}
{{- $_ := set $spec "env" dict -}}
{{- /* set, not merge: merge would not let an override of false or 0 replace a default */ -}}
{{- range $key, $value := index .ctx.Values.worker.specialists .name | default dict -}}
{{- $_ := set $spec $key $value -}}
{{- end -}}
{{- toJson $spec -}}
{{- end }}

{{/* A KEDA rabbitmq trigger on one queue, counting ready + unacked messages through the management API
     (protocol http: the amqp protocol sees only ready messages, so busy workers would be scaled in).
     (dict "ctx" $ "queue" "taskyard.intake" "value" 200 "activation" 0) */}}
{{- define "taskyard.rabbitmqTrigger" -}}
- type: rabbitmq
  metadata:
    protocol: http
    mode: QueueLength
    queueName: {{ .queue | quote }}
    value: {{ .value | toString | quote }}
    activationValue: {{ .activation | toString | quote }}
    {{- if .ctx.Values.rabbitmq.cluster.enabled }}
    host: {{ printf "http://%s.%s.svc:15672/" (include "taskyard.rabbitmqClusterName" .ctx) .ctx.Release.Namespace | quote }}
    vhostName: /
    {{- end }}
  authenticationRef:
    name: {{ include "taskyard.componentName" (dict "ctx" .ctx "component" "rabbitmq-auth") }}
{{- end }}

{{/* The pod template of one specialist's worker (Deployment or ScaledJob): (dict "ctx" $ "name" N "spec" S) */}}
{{- define "taskyard.workerPodSpec" -}}
{{- $ctx := .ctx }}
{{- $w := $ctx.Values.worker }}
{{- $c := dict "ctx" $ctx "component" "worker" }}
serviceAccountName: {{ include "taskyard.serviceAccountName" $c }}
automountServiceAccountToken: false
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "taskyard.podSecurityContext" $ctx | nindent 2 }}
# The worker's drain period plus a margin: in-flight tasks finish or are handed back before SIGKILL.
terminationGracePeriodSeconds: {{ add $w.shutdownGraceSeconds $w.terminationGraceMarginSeconds }}
{{- if eq .spec.mode "job" }}
restartPolicy: Never
{{- end }}
containers:
  - name: worker
    image: {{ include "taskyard.image" (dict "ctx" $ctx "image" $w.image) }}
    imagePullPolicy: {{ $ctx.Values.image.pullPolicy }}
    command: [taskyard-worker, --specialist, {{ .name | quote }}]
    ports:
      - name: health
        containerPort: {{ $w.healthPort }}
        protocol: TCP
    env:
      {{- include "taskyard.connectionEnv" $ctx | trim | nindent 6 }}
      {{- include "taskyard.llmEnv" $ctx | trim | nindent 6 }}
      {{- include "taskyard.sharedEnv" $ctx | nindent 6 }}
      {{- include "taskyard.catalogEnv" $ctx | nindent 6 }}
      {{- include "taskyard.healthEnv" (dict "port" $w.healthPort) | nindent 6 }}
      - name: TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS
        value: {{ $w.shutdownGraceSeconds | quote }}
      - name: TASKYARD_WORKER_HTTP_ALLOWLIST
        value: {{ join "," $w.httpAllowlist | quote }}
      {{- if and (eq .spec.mode "job") (gt (int $w.job.exitWhenIdleSeconds) 0) }}
      # A Job's worker exits once idle, so the Job completes instead of running until its deadline.
      - name: TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS
        value: {{ $w.job.exitWhenIdleSeconds | quote }}
      {{- end }}
      {{- include "taskyard.extraEnv" (list $ctx.Values.config.env $w.env .spec.env) | trim | nindent 6 }}
    {{- include "taskyard.probes" (dict "port" "health") | nindent 4 }}
    resources:
      {{- toYaml .spec.resources | nindent 6 }}
    securityContext:
      {{- toYaml $ctx.Values.securityContext | nindent 6 }}
    volumeMounts:
      {{- include "taskyard.catalogVolumeMount" $ctx | nindent 6 }}
      {{- include "taskyard.tmpVolumeMount" $ctx | nindent 6 }}
volumes:
  {{- include "taskyard.catalogVolume" $ctx | nindent 2 }}
  {{- include "taskyard.tmpVolume" $ctx | nindent 2 }}
{{- with $w.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $w.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $w.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Labels of one specialist's worker pods: (dict "ctx" $ "name" N) */}}
{{- define "taskyard.workerSelectorLabels" -}}
{{ include "taskyard.selectorLabels" (dict "ctx" .ctx "component" "worker") }}
taskyard.dev/specialist: {{ .name | quote }}
{{- end }}

{{- define "taskyard.workerLabels" -}}
{{ include "taskyard.commonLabels" .ctx }}
{{ include "taskyard.workerSelectorLabels" . }}
{{- end }}

{{- define "taskyard.workerName" -}}
{{ include "taskyard.componentName" (dict "ctx" .ctx "component" (printf "worker-%s" .name)) }}
{{- end }}
