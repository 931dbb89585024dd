{{/* The broker agent's environment, as a JSON env map (its ScaledObject reads the queue prefix from it). */}}
{{- define "taskyard.brokerEnv" -}}
{{- $b := .Values.brokerAgent -}}
{{- $env := include "taskyard.env.base" (dict "ctx" . "llm" true) | fromJson -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.healthEnv" (dict "port" $b.healthPort))) -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.webhookEnv" .)) -}}
{{- $_ := set $env "TASKYARD_BROKER_SHUTDOWN_GRACE_SECONDS" (dict "value" (include "taskyard.env.string" $b.shutdownGraceSeconds)) -}}
{{- $_ := set $env "TASKYARD_BROKER_SCHEDULER_ENABLED" (dict "value" (include "taskyard.env.string" $b.scheduler.enabled)) -}}
{{- $_ := set $env "TASKYARD_BROKER_SCHEDULER_INTERVAL_SECONDS" (dict "value" (include "taskyard.env.string" $b.scheduler.intervalSeconds)) -}}
{{- $_ := set $env "TASKYARD_BROKER_SCHEDULER_BATCH_SIZE" (dict "value" (include "taskyard.env.string" $b.scheduler.batchSize)) -}}
{{- $_ := set $env "TASKYARD_BROKER_LANE_ENABLED" (dict "value" (include "taskyard.env.string" $b.lanes.enabled)) -}}
{{- $_ := set $env "TASKYARD_BROKER_LANE_FACTOR" (dict "value" (include "taskyard.env.string" $b.lanes.factor)) -}}
{{- $_ := set $env "TASKYARD_BROKER_LANE_MIN_DEPTH" (dict "value" (include "taskyard.env.string" $b.lanes.minDepth)) -}}
{{- $_ := set $env "TASKYARD_BROKER_LANE_FEEDER_INTERVAL_SECONDS" (dict "value" (include "taskyard.env.string" $b.lanes.feederIntervalSeconds)) -}}
{{- $_ := set $env "TASKYARD_TASK_RETENTION_ENABLED" (dict "value" (include "taskyard.env.string" $b.retention.enabled)) -}}
{{- $_ := set $env "TASKYARD_TASK_RETENTION_DAYS" (dict "value" (include "taskyard.env.string" $b.retention.days)) -}}
{{- $_ := set $env "TASKYARD_TASK_RETENTION_INTERVAL_SECONDS" (dict "value" (include "taskyard.env.string" $b.retention.intervalSeconds)) -}}
{{- $_ := set $env "TASKYARD_TASK_RETENTION_BATCH_SIZE" (dict "value" (include "taskyard.env.string" $b.retention.batchSize)) -}}
{{- include "taskyard.env.put" (dict "env" $env "values" .Values.config.env) -}}
{{- include "taskyard.env.put" (dict "env" $env "values" $b.env) -}}
{{- toJson $env -}}
{{- end }}
