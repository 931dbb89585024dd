{{/* The environment of every taskyard container: the chart's settings and the env maps that replace them. */}}

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
{{- if and .Values.postgresql.cluster.enabled .Values.postgresql.cluster.pooler.enabled }}
{{- $p := .Values.postgresql.cluster }}
{{- /* Through the Pooler's Service: the user from the URL, the password from the operator's Secret
       (asyncpg reads PGPASSWORD), so no password is ever pasted into a URL unencoded. */}}
- name: PGPASSWORD
  valueFrom: {secretKeyRef: {name: {{ include "taskyard.postgresqlClusterName" . }}-app, key: password}}
- name: TASKYARD_DB_URL
  value: {{ printf "postgresql://%s@%s.%s.svc:5432/%s" $p.owner (include "taskyard.postgresqlPoolerName" .) .Release.Namespace $p.database | quote }}
- name: TASKYARD_DB_POOLED
  value: "true"
{{- if eq (toString (index $p.pooler.parameters "max_prepared_statements" | default "0")) "0" }}
- name: TASKYARD_DB_STATEMENT_CACHE_SIZE
  value: "0"
{{- end }}
{{- else if .Values.postgresql.cluster.enabled }}
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
- name: TASKYARD_LLM_TIMEOUT_SECONDS
  value: {{ include "taskyard.env.string" .Values.llm.timeoutSeconds | quote }}
{{- end }}

{{/* Shared settings of every service (config.env and a component's env may replace any of them). */}}
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

{{/* The webhook settings: the API checks a submission's URL with them, the broker agent delivers with them. */}}
{{- define "taskyard.webhookEnv" -}}
- name: TASKYARD_WEBHOOK_ALLOW_PRIVATE
  value: {{ .Values.webhooks.allowPrivate | quote }}
- name: TASKYARD_WEBHOOK_ALLOW_LOOPBACK
  value: {{ .Values.webhooks.allowLoopback | quote }}
- name: TASKYARD_WEBHOOK_TIMEOUT_SECONDS
  value: {{ include "taskyard.env.string" .Values.webhooks.timeoutSeconds | quote }}
- name: TASKYARD_WEBHOOK_RETRY_HOURS
  value: {{ include "taskyard.env.string" .Values.webhooks.retryHours | quote }}
{{- end }}

{{- define "taskyard.catalogEnv" -}}
- name: TASKYARD_CATALOG_PATH
  value: {{ printf "%s/specialists.yaml" .Values.config.catalogMountPath | quote }}
- name: TASKYARD_CATALOG_SOURCE
  value: {{ .Values.catalog.source | quote }}
{{- if eq .Values.catalog.source "kubernetes" }}
- name: TASKYARD_CATALOG_FALLBACK
  value: {{ .Values.catalog.fallback | default (include "taskyard.catalog" . | fromJson).fallback | quote }}
{{- end }}
{{- end }}

{{/* Whether a service's pod mounts its service account token: only to read Specialist resources. */}}
{{- define "taskyard.catalogToken" -}}
{{- eq .Values.catalog.source "kubernetes" -}}
{{- end }}

{{- define "taskyard.healthEnv" -}}
- name: TASKYARD_HEALTH_HOST
  value: "0.0.0.0"
- name: TASKYARD_HEALTH_PORT
  value: {{ .port | quote }}
{{- end }}

{{/* A container's environment is one map, name -> {value} or {valueFrom}, filled in layers (the chart's own
     settings, then config.env, then the component's and the specialist's env): a later layer replaces an
     earlier one's entry, so overriding a variable the chart sets never renders it twice (server-side apply,
     Helm 4's default, rejects duplicate env names). "taskyard.env.render" writes it sorted by name, which also
     puts RABBITMQ_* before the TASKYARD_AMQP_URL that refers to them with $(NAME). */}}

{{/* Adds the entries of an env list in YAML text: (dict "env" $env "list" (include "taskyard.connectionEnv" $)) */}}
{{- define "taskyard.env.addList" -}}
{{- range (.list | fromYamlArray) -}}
{{- $_ := set $.env .name (omit . "name") -}}
{{- end -}}
{{- end }}

{{/* Adds NAME: value entries (a value may also be {valueFrom: ...}): (dict "env" $env "values" $map) */}}
{{- define "taskyard.env.put" -}}
{{- range $name, $value := .values | default dict -}}
{{- if kindIs "map" $value -}}
{{- if not (hasKey $value "valueFrom") -}}
{{- fail (printf "env %s: a map value must be {valueFrom: ...}" $name) -}}
{{- end -}}
{{- $_ := set $.env $name (pick $value "valueFrom") -}}
{{- else -}}
{{- $_ := set $.env $name (dict "value" (include "taskyard.env.string" $value)) -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/* A value as env text; whole numbers without an exponent (toString gives 2097152 as 2.097152e+06). */}}
{{- define "taskyard.env.string" -}}
{{- if and (kindIs "float64" .) (eq . (floor .)) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end }}

{{/* One entry's plain value, checked against a pattern, for settings other objects are built from:
     (dict "env" $env "name" N "pattern" P "what" "a number of seconds") */}}
{{- define "taskyard.env.plain" -}}
{{- $entry := index .env .name | default dict -}}
{{- if not (hasKey $entry "value") -}}
{{- fail (printf "%s: the chart builds other settings from it, so it must be a plain value, not valueFrom" .name) -}}
{{- end -}}
{{- if not (regexMatch .pattern $entry.value) -}}
{{- fail (printf "%s=%q: not %s (%s)" .name $entry.value .what .pattern) -}}
{{- end -}}
{{- $entry.value -}}
{{- end }}

{{/* One entry's value as a number: (dict "env" $env "name" N) */}}
{{- define "taskyard.env.number" -}}
{{- include "taskyard.env.plain" (dict "env" .env "name" .name "pattern" "^[0-9]+([.][0-9]+)?$" "what" "a number") -}}
{{- end }}

{{/* The names KEDA's triggers are built from, as the container's env has them: (dict "env" $env) gives
     {"prefix": TASKYARD_AMQP_PREFIX, "schema": TASKYARD_DB_SCHEMA} (the settings classes' patterns: the schema
     goes into a SQL query). */}}
{{- define "taskyard.env.names" -}}
{{- $prefix := include "taskyard.env.plain" (dict "env" .env "name" "TASKYARD_AMQP_PREFIX" "pattern" "^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$" "what" "a queue name prefix") -}}
{{- $schema := include "taskyard.env.plain" (dict "env" .env "name" "TASKYARD_DB_SCHEMA" "pattern" "^[a-z_][a-z0-9_]{0,62}$" "what" "a schema name") -}}
{{- toJson (dict "prefix" $prefix "schema" $schema) -}}
{{- end }}

{{/* The env map as a container's sorted env list. */}}
{{- define "taskyard.env.render" -}}
{{- range $name := keys . | sortAlpha }}
{{- $entry := index $ $name }}
- name: {{ $name }}
  {{- if hasKey $entry "valueFrom" }}
  valueFrom:
    {{- toYaml $entry.valueFrom | nindent 4 }}
  {{- else }}
  value: {{ $entry.value | quote }}
  {{- end }}
{{- end }}
{{- end }}

{{/* The chart's settings every service shares (connection, shared, catalog), as a JSON env map: (dict "ctx" $
     "llm" true) also adds the LLM settings. */}}
{{- define "taskyard.env.base" -}}
{{- $env := dict -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.connectionEnv" .ctx)) -}}
{{- if .llm -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.llmEnv" .ctx)) -}}
{{- end -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.sharedEnv" .ctx)) -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.catalogEnv" .ctx)) -}}
{{- toJson $env -}}
{{- end }}
