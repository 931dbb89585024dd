{{/* One specialist's worker: its settings, environment, pod template, names and labels. */}}

{{/* A worker's settings for one specialist: defaults of worker.autoscaling overlaid by its overrides, plus
     what the chart reads from its catalog entry (the defaults are taskyard_common.catalog.SpecialistSpec's;
     a test keeps them equal). (dict "ctx" $ "name" N) */}}
{{- define "taskyard.workerSpec" -}}
{{- $entry := dict -}}
{{- range (include "taskyard.catalog" .ctx | fromJson).specialists -}}
{{- if eq .name $.name -}}
{{- $entry = . -}}
{{- end -}}
{{- end -}}
{{- $spec := omit (deepCopy .ctx.Values.worker.autoscaling) "enabled" -}}
{{- $_ := set $spec "enabled" true -}}
{{- $_ := set $spec "mode" "deployment" -}}
{{- $_ := set $spec "resources" (deepCopy .ctx.Values.worker.resources) -}}
{{- $_ := set $spec "env" dict -}}
{{- $_ := set $spec "shutdownGraceSeconds" nil -}}
{{- /* set, not merge: merge would not let an override of false or 0 replace a default */ -}}
{{- range $key, $value := index .ctx.Values.worker.specialists .name | default dict -}}
{{- $_ := set $spec $key $value -}}
{{- end -}}
{{- $_ := set $spec "concurrency" (int (dig "concurrency" 16 $entry)) -}}
{{- $_ := set $spec "llmRetries" (int (dig "llm_retries" 2 $entry)) -}}
{{- if kindIs "invalid" $spec.tasksPerReplica -}}
{{- $_ := set $spec "tasksPerReplica" $spec.concurrency -}}
{{- end -}}
{{- toJson $spec -}}
{{- end }}

{{/* One specialist's worker environment, as a JSON env map: (dict "ctx" $ "name" N "spec" S).
     TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS, unless a value or an env map sets it, is the step bound: the
     longest one agent step can take, so a stopping worker can let each running task finish its current step,
     checkpoint it and hand it back:
       llm_timeout × (llm_retries + 1) + 8 × llm_retries + tool_timeout
     (TASKYARD_LLM_TIMEOUT_SECONDS per LLM call, the catalog's llm_retries in-step retries each after a backoff
     of at most 8 s, then one tool call bounded by TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS), from the values this
     same environment ends up with. */}}
{{- define "taskyard.workerEnv" -}}
{{- $ctx := .ctx -}}
{{- $w := $ctx.Values.worker -}}
{{- $grace := "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS" -}}
{{- $env := include "taskyard.workerBaseEnv" $ctx | fromJson -}}
{{- if and (eq .spec.mode "job") (gt (int $w.job.exitWhenIdleSeconds) 0) -}}
{{- /* A Job's worker exits once idle, so the Job completes instead of running until its deadline. */ -}}
{{- $_ := set $env "TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS" (dict "value" (include "taskyard.env.string" $w.job.exitWhenIdleSeconds)) -}}
{{- end -}}
{{- include "taskyard.env.put" (dict "env" $env "values" $ctx.Values.config.env) -}}
{{- include "taskyard.env.put" (dict "env" $env "values" $w.env) -}}
{{- if not (kindIs "invalid" .spec.shutdownGraceSeconds) -}}
{{- $_ := set $env $grace (dict "value" (include "taskyard.env.string" .spec.shutdownGraceSeconds)) -}}
{{- end -}}
{{- include "taskyard.env.put" (dict "env" $env "values" .spec.env) -}}
{{- if not (hasKey $env $grace) -}}
{{- $llm := include "taskyard.env.number" (dict "env" $env "name" "TASKYARD_LLM_TIMEOUT_SECONDS") | float64 -}}
{{- $tool := include "taskyard.env.number" (dict "env" $env "name" "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS") | float64 -}}
{{- $retries := .spec.llmRetries -}}
{{- $bound := addf (mulf $llm (add1 $retries)) (mul 8 $retries) $tool -}}
{{- $_ := set $env $grace (dict "value" (include "taskyard.env.string" $bound)) -}}
{{- end -}}
{{- toJson $env -}}
{{- end }}

{{/* Every worker's own settings before config.env and worker.env, as a JSON env map (the operator's worker
     template carries the same map): the shared settings, health, the HTTP tool, the global shutdown grace. */}}
{{- define "taskyard.workerBaseEnv" -}}
{{- $w := .Values.worker -}}
{{- $env := include "taskyard.env.base" (dict "ctx" . "llm" true) | fromJson -}}
{{- include "taskyard.env.addList" (dict "env" $env "list" (include "taskyard.healthEnv" (dict "port" $w.healthPort))) -}}
{{- $_ := set $env "TASKYARD_WORKER_HTTP_ALLOWLIST" (dict "value" (join "," $w.httpAllowlist)) -}}
{{- $_ := set $env "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS" (dict "value" (include "taskyard.env.string" $w.httpTimeoutSeconds)) -}}
{{- if not (kindIs "invalid" $w.shutdownGraceSeconds) -}}
{{- $_ := set $env "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS" (dict "value" (include "taskyard.env.string" $w.shutdownGraceSeconds)) -}}
{{- end -}}
{{- toJson $env -}}
{{- end }}

{{/* The pod template of one specialist's worker (Deployment or ScaledJob): (dict "ctx" $ "name" N "spec" S) */}}
{{- define "taskyard.workerPodSpec" -}}
{{- $ctx := .ctx }}
{{- $w := $ctx.Values.worker }}
{{- $c := dict "ctx" $ctx "component" "worker" }}
{{- $env := include "taskyard.workerEnv" . | fromJson }}
{{- $grace := include "taskyard.env.number" (dict "env" $env "name" "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS") | float64 }}
serviceAccountName: {{ include "taskyard.serviceAccountName" $c }}
automountServiceAccountToken: {{ include "taskyard.catalogToken" $ctx }}
{{- with $ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- include "taskyard.podSecurityContext" $ctx | nindent 2 }}
# The worker's shutdown grace (the step bound unless overridden) plus a margin to checkpoint, hand back and exit.
terminationGracePeriodSeconds: {{ add (ceil $grace | int) $w.terminationGraceMarginSeconds }}
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
        containerPort: {{ include "taskyard.env.number" (dict "env" $env "name" "TASKYARD_HEALTH_PORT") }}
        protocol: TCP
    env:
      {{- include "taskyard.env.render" $env | trim | nindent 6 }}
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
