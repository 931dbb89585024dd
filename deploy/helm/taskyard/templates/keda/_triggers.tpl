{{/* KEDA triggers. */}}

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
