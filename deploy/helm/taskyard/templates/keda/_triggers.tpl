{{/* KEDA triggers. Each reports an AverageValue metric: the HPA asks for ceil(metric / value) replicas, and
     the highest of a ScaledObject's triggers wins. */}}

{{/* A rabbitmq trigger on one queue, counting ready + unacked messages through the management API
     (protocol http: the amqp protocol sees only ready messages, so busy workers would be scaled in).
     With "levels" true, "queue" is a work queue's normal-level name and the trigger sums the messages of
     every priority level's queue (the name, name.high, name.low) through one anchored regex: one trigger,
     not one per level, because the HPA takes the highest trigger, not their sum.
     (dict "ctx" $ "name" "work-queue" "queue" "taskyard.intake" "levels" true "value" 200 "activation" 0) */}}
{{- define "taskyard.rabbitmqTrigger" -}}
- type: rabbitmq
  {{- with .name }}
  name: {{ . }}
  {{- end }}
  metadata:
    protocol: http
    mode: QueueLength
    {{- if .levels }}
    queueName: {{ printf "^%s(\\.high|\\.low)?$" (.queue | replace "." "\\.") | squote }}
    useRegex: "true"
    operation: sum
    {{- else }}
    queueName: {{ .queue | quote }}
    {{- end }}
    value: {{ include "taskyard.env.string" .value | quote }}
    activationValue: {{ include "taskyard.env.string" .activation | quote }}
    {{- if .ctx.Values.rabbitmq.cluster.enabled }}
    host: {{ printf "http://%s.%s.svc:15672/" (include "taskyard.rabbitmqClusterName" .ctx) .ctx.Release.Namespace | quote }}
    vhostName: /
    {{- end }}
  authenticationRef:
    name: {{ include "taskyard.componentName" (dict "ctx" .ctx "component" "rabbitmq-auth") }}
{{- end }}

{{/* A postgresql trigger counting one specialist's unfinished tasks in the task store: queued, running
     (including those whose message was settled early, which no queue shows any more) and waiting for a retry.
     The partial index tasks_active_specialist_idx (migration 0005) answers it. The schema (the worker's
     TASKYARD_DB_SCHEMA) and the name are checked against strict patterns before they reach the query.
     (dict "ctx" $ "schema" "taskyard" "specialist" N "value" 16 "activation" 0) */}}
{{- define "taskyard.postgresqlTrigger" -}}
- type: postgresql
  name: unfinished-tasks
  metadata:
    query: {{ printf "SELECT count(*) FROM %s.tasks WHERE specialist = '%s' AND status IN ('queued', 'running', 'retrying')" .schema .specialist | quote }}
    targetQueryValue: {{ include "taskyard.env.string" .value | quote }}
    activationTargetQueryValue: {{ include "taskyard.env.string" .activation | quote }}
  authenticationRef:
    name: {{ include "taskyard.componentName" (dict "ctx" .ctx "component" "postgresql-auth") }}
{{- end }}
