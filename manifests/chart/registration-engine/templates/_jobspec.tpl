{{/*
The spec of every Job that runs the engine: the CronJob's jobTemplate, the
run after an install or an upgrade that changes what a run reads
(run-job.yaml), and, with args ["cleanup"], the uninstall hook
(cleanup-job.yaml), and, with "retry" true, the retry CronJob's
(retry-cronjob.yaml). One source, so that a run started by the release is
the run the schedule starts. Called with (dict "root" $ "args" (list …));
args may be omitted.
*/}}
{{- define "registration-engine.jobSpec" -}}
{{- $args := .args -}}
{{- $retry := .retry -}}
{{- with .root -}}
{{- $name := include "registration-engine.name" . -}}
{{- if $retry -}}
# A failed retry is tried again when its record says (the retry CronJob's
# next look), not seconds later.
backoffLimit: 0
{{- else -}}
# Retries for transient failures (exit 1, 124). Permanent failures
# (exit 2) fail at once, below. A run that still fails records when its
# next attempt is due, which the retry CronJob runs (retry-cronjob.yaml).
backoffLimit: 2
{{- end }}
# The pod that sleeps starts within 15 min of the schedule, sleeps up to
# startupSleepMax and runs up to runDeadline; retries do not sleep.
# jobDeadline, or that rounded up to the hour: 2 h for the defaults
# (15 + 60 + 10 + 2 × 11 min = 107 min).
activeDeadlineSeconds: {{ include "registration-engine.activeDeadlineSeconds" . }}
{{- if $retry }}
# A look that did nothing need not stay: an hour is enough to read it.
ttlSecondsAfterFinished: 3600
{{- else }}
# Keep a finished Job (and its pod's log) for three days.
ttlSecondsAfterFinished: 259200
{{- end }}
podFailurePolicy:
  rules:
    # Exit 2: permanent (bad configuration, no supported cloud, a plan
    # mismatch, RBAC). Another pod would fail the same way.
    - action: FailJob
      onExitCodes:
        containerName: {{ $name }}
        operator: In
        values: [2]
    # Evicted, preempted or drained: not the run's fault.
    - action: Ignore
      onPodConditions:
        - type: DisruptionTarget
template:
  {{- include "registration-engine.podTemplate" (dict "root" . "args" $args "retry" $retry) | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The engine's pod template (metadata and spec), for every Job that runs it:
see registration-engine.jobSpec. Called with (dict "root" $ "args" (list …)).
With "cleanup" true, the uninstall hook's pod (cleanup-job.yaml): it runs
after the release's objects are gone, so it runs as the hook's own
ServiceAccount, mounts none of the release's ConfigMaps (a pod waiting for
a deleted ConfigMap never starts), needs no Azure credential and reads
only the variables `registration-engine cleanup` reads.
*/}}
{{- define "registration-engine.podTemplate" -}}
{{- $args := .args -}}
{{- $cleanup := .cleanup -}}
{{- $retry := .retry -}}
{{- with .root -}}
{{- $mode := include "registration-engine.credentialMode" . -}}
{{- $name := include "registration-engine.name" . -}}
metadata:
  # The chart's labels, podLabels, azure.workload.identity/use (the
  # Workload Identity webhook; not for the cleanup) and the billing label
  # when asked for.
  {{- $labels := include "registration-engine.podLabels" . | fromYaml }}
  {{- if $cleanup }}
  {{- $_ := unset $labels "azure.workload.identity/use" }}
  {{- end }}
  {{- if $retry }}
  {{- $_ := set $labels "registration-engine.cattle.io/run" "retry" }}
  {{- end }}
  labels:
    {{- toYaml $labels | nindent 4 }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ $name }}{{ if $cleanup }}-cleanup{{ end }}
  {{- with include "registration-engine.imagePullSecrets" . | trim }}
  imagePullSecrets:
    {{- . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  restartPolicy: Never
  {{- if and (eq (toString .Values.hostNetwork) "true") (not $cleanup) }}
  # AKS's IMDS restriction lets only pods on the node's network reach
  # IMDS; ClusterFirstWithHostNet keeps the cluster's DNS, which the
  # handover check asks for the update server's name. The cleanup asks
  # neither IMDS nor DNS: its pod keeps its own network.
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  # SIGTERM cancels the run; the Lease is released within 5 s.
  terminationGracePeriodSeconds: 30
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if not .Values.architectures }}
  {{- fail "architectures is empty: list the kubernetes.io/arch values the engine's image carries (amd64, arm64), or the pod may land on a node where it dies with exec format error" }}
  {{- end }}
  # Only nodes whose architecture the image carries.
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
          - matchExpressions:
              - key: kubernetes.io/arch
                operator: In
                values:
                  {{- toYaml .Values.architectures | nindent 18 }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: {{ $name }}
      image: {{ include "registration-engine.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- with $args }}
      args: {{ toJson . }}
      {{- end }}
      env:
        {{- if not $cleanup }}
        # workload-identity: the webhook injects AZURE_CLIENT_ID.
        # managed-identity: the extension's identity, through IMDS.
        - name: AZURE_CREDENTIAL_MODE
          value: {{ $mode }}
        {{- if eq $mode "managed-identity" }}
        - name: AZURE_CLIENT_ID
          value: {{ include "registration-engine.managedIdentityClientId" . | quote }}
        {{- end }}
        # The cluster extension whose Marketplace plan proves this is
        # a PAYG deployment, and the plan it must carry.
        - name: EXTENSION_RESOURCE_ID
          value: {{ include "registration-engine.extensionResourceId" . | quote }}
        - name: MARKETPLACE_PUBLISHER_ID
          value: {{ .Values.marketplace.publisherId | quote }}
        - name: MARKETPLACE_OFFER_ID
          value: {{ .Values.marketplace.offerId | quote }}
        - name: MARKETPLACE_PLAN_ID
          value: {{ include "registration-engine.planId" . | quote }}
        # Who owns this release, so that a remedy names the customer's
        # command: Azure's extension manager (the bundle's image comes
        # from global.azure.images) or a person with Helm.
        - name: RELEASE_MANAGER
          value: {{ ternary "azure-extension" "helm" (not (empty (dig "images" "engine" "image" "" (include "registration-engine.azure" . | fromYaml)))) }}
        - name: RELEASE_NAME
          value: {{ .Release.Name | quote }}
        # Optional, so that a missing Secret is a warning in the log,
        # not a pod that never starts.
        - name: REGISTRATION_CODE
          valueFrom:
            secretKeyRef:
              name: registration-code
              key: regCode
              optional: true
        {{- end }}
        # The Lease holder, and what the logs name.
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        {{- if not $cleanup }}
        # Only a Job the CronJob scheduled takes the startup sleep.
        - name: JOB_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['batch.kubernetes.io/job-name']
        # With JOB_NAME, the Job each run records its Event on.
        - name: JOB_UID
          valueFrom:
            fieldRef:
              fieldPath: metadata.labels['batch.kubernetes.io/controller-uid']
        - name: CRONJOB_NAME
          value: {{ $name }}
        {{- if eq (toString .Values.retry.enabled) "true" }}
        # Each run suspends the retry CronJob when no attempt is scheduled
        # and resumes it when one is (retry-cronjob.yaml).
        - name: RETRY_CRONJOB_NAME
          value: {{ $name }}-retry
        {{- end }}
        # The Role is limited to exactly these names.
        - name: REGISTRATION_SECRET_NAME
          value: scc-registration
        {{- end }}
        - name: REGISTRATION_SECRET_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: LEASE_NAME
          value: registration-engine
        {{- if not $cleanup }}
        - name: REGIONSRV_CONFIG
          value: /etc/regionserverclnt.cfg
        - name: RUN_DEADLINE
          value: {{ include "registration-engine.durationText" .Values.runDeadline | quote }}
        - name: STARTUP_SLEEP_MAX
          value: {{ include "registration-engine.durationText" .Values.startupSleepMax | quote }}
        # A failed run records when its next attempt is due, for the retry
        # CronJob, which looks this often.
        - name: RETRY_INTERVAL
          value: {{ printf "%dm" (int .Values.retry.intervalMinutes) | quote }}
        {{- if $retry }}
        - name: ONLY_WHEN_DUE
          value: "true"
        {{- end }}
        {{- end }}
        - name: IN_CLUSTER_DNS
          value: {{ .Values.inClusterDNS | toString | quote }}
        # The admission policy admits CoreDNS entries only for names
        # under these (coredns-policy.yaml).
        - name: UPDATE_SERVER_DOMAINS
          value: {{ include "registration-engine.updateServerDomains" . | quote }}
        # The admission policy refuses entries for addresses in these in a
        # hosts block that answers reverse queries (clusterRanges); the
        # engine refuses them itself first. The schema wants at least one.
        {{- with .Values.clusterAddressRanges }}
        - name: CLUSTER_ADDRESS_RANGES
          value: {{ join "," . | quote }}
        {{- end }}
        {{- if not $cleanup }}
        - name: OPERATOR_RECOVERY
          value: {{ .Values.operatorRecovery | toString | quote }}
        - name: LOG_LEVEL
          value: {{ .Values.logLevel | quote }}
        - name: LOG_FORMAT
          value: {{ .Values.logFormat | quote }}
        {{- end }}
        # Lets the Go runtime collect garbage before the memory limit
        # kills the pod: three quarters of resources.limits.memory.
        - name: GOMEMLIMIT
          value: {{ include "registration-engine.goMemLimit" . | quote }}
        {{- if not $cleanup }}
        {{- /* The cleanup talks to the API server alone: no proxy. */}}
        {{- $proxy := include "registration-engine.proxyVars" . | fromYaml }}
        {{- if $proxy }}
        # The proxy Azure passed (Azure.proxySettings.isProxyEnabled), but
        # for a variable extraEnv sets. Entra, ARM and the region servers
        # go through it; IMDS, the API server and the update servers never
        # do, whatever NO_PROXY says (docs/install.md, "Behind a proxy").
        # The proxy URLs may hold a password: they come from the Secret
        # the chart renders (secret.yaml), never as a value of the pod.
        {{- $secretKeys := include "registration-engine.proxySecretKeys" . | fromYamlArray }}
        {{- $secretName := include "registration-engine.proxySecretName" . }}
        {{- range $k, $v := $proxy }}
        - name: {{ $k }}
          {{- if has $k $secretKeys }}
          valueFrom:
            secretKeyRef:
              name: {{ $secretName }}
              key: {{ $k }}
          {{- else }}
          value: {{ $v | quote }}
          {{- end }}
        {{- end }}
        {{- end }}
        {{- if and (include "registration-engine.proxyCert" .) (not (has "SSL_CERT_DIR" (include "registration-engine.extraEnvNames" . | fromYamlArray))) }}
        # Azure.proxySettings.proxyCert beside the system roots
        # (registration-engine.proxyCertDir in _helpers.tpl says how Go
        # reads them).
        - name: SSL_CERT_DIR
          value: {{ include "registration-engine.sslCertDir" . | quote }}
        {{- end }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        runAsNonRoot: true
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: ["ALL"]
      {{- if not $cleanup }}
      volumeMounts:
        - name: regionserverclnt-config
          mountPath: /etc/regionserverclnt.cfg
          subPath: regionserverclnt.cfg
          readOnly: true
        # certLocation: one <regionsrv entry>.pem per region server.
        - name: region-server-certs
          mountPath: /usr/lib/regionService/certs
          readOnly: true
        {{- if include "registration-engine.proxyCert" . }}
        # Azure.proxySettings.proxyCert (SSL_CERT_DIR above).
        - name: proxy-ca
          mountPath: {{ include "registration-engine.proxyCertDir" . }}
          readOnly: true
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
  {{- if not $cleanup }}
  volumes:
    - name: regionserverclnt-config
      configMap:
        name: regionserverclnt-config
    # Optional, so that a missing ConfigMap shows up as "no
    # certificate for region server …" in the log rather than a pod
    # stuck in ContainerCreating.
    - name: region-server-certs
      configMap:
        name: region-server-certs
        optional: true
    {{- if include "registration-engine.proxyCert" . }}
    - name: proxy-ca
      configMap:
        name: {{ $name }}-proxy-ca
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- end }}
{{- end }}
{{- end }}
