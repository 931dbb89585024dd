{{/* The operator's worker template: what the chart knows about every worker and a Specialist does not say,
     as JSON for the operator's TASKYARD_OPERATOR_WORKER (taskyard_operator.settings.WorkerTemplate). The
     operator renders a Specialist's worker from it exactly as templates/worker/ render a values-driven one
     (a test compares the two). */}}
{{- define "taskyard.operatorWorkerTemplate" -}}
{{- $w := .Values.worker -}}
{{- $c := dict "ctx" . "component" "worker" -}}
{{- $overrides := dict -}}
{{- include "taskyard.env.put" (dict "env" $overrides "values" .Values.config.env) -}}
{{- include "taskyard.env.put" (dict "env" $overrides "values" $w.env) -}}
{{- $labels := include "taskyard.commonLabels" . | fromYaml -}}
{{- $_ := set $labels "app.kubernetes.io/managed-by" "taskyard-operator" -}}
{{- $t := dict
    "fullname" (include "taskyard.fullname" .)
    "labels" $labels
    "selector_labels" (include "taskyard.selectorLabels" $c | fromYaml)
    "keda" .Values.keda.enabled
    "autoscaling" $w.autoscaling.enabled
    "image" (include "taskyard.image" (dict "ctx" . "image" $w.image))
    "image_pull_policy" .Values.image.pullPolicy
    "image_pull_secrets" (.Values.imagePullSecrets | default list)
    "service_account_name" (include "taskyard.serviceAccountName" $c)
    "automount_service_account_token" (eq .Values.catalog.source "kubernetes")
    "pod_security_context" (include "taskyard.podSecurityContext" . | fromYaml)
    "security_context" .Values.securityContext
    "catalog_config_map" (include "taskyard.componentName" (dict "ctx" . "component" "catalog"))
    "catalog_mount_path" .Values.config.catalogMountPath
    "pod_annotations" ($w.podAnnotations | default dict)
    "resources" $w.resources
    "node_selector" ($w.nodeSelector | default dict)
    "tolerations" ($w.tolerations | default list)
    "affinity" ($w.affinity | default dict)
    "env" (include "taskyard.workerBaseEnv" . | fromJson)
    "env_overrides" $overrides
    "termination_grace_margin_seconds" $w.terminationGraceMarginSeconds
    "defaults" (omit $w.autoscaling "enabled")
    "job" $w.job
    "rabbitmq_auth" (include "taskyard.componentName" (dict "ctx" . "component" "rabbitmq-auth"))
    "postgresql_auth" (include "taskyard.componentName" (dict "ctx" . "component" "postgresql-auth"))
-}}
{{- if .Values.rabbitmq.cluster.enabled -}}
{{- $_ := set $t "rabbitmq_host" (printf "http://%s.%s.svc:15672/" (include "taskyard.rabbitmqClusterName" .) .Release.Namespace) -}}
{{- end -}}
{{- toJson $t -}}
{{- end }}
