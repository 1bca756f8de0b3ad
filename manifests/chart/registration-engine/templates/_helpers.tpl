{{/*
The names are fixed, not derived from the release: the Role grants the
Secret and the Lease by name, the engine recognises its scheduled Jobs by
the CronJob's name (CRONJOB_NAME), and rancher/scc-operator and the README
expect these.
*/}}
{{- define "registration-engine.name" -}}registration-engine{{- end }}

{{- define "registration-engine.labels" -}}
app.kubernetes.io/name: {{ include "registration-engine.name" . }}
{{- end }}

{{/*
The subjects of every RoleBinding and ClusterRoleBinding: the engine's
ServiceAccount, in the release's namespace.
*/}}
{{- define "registration-engine.subjects" -}}
- kind: ServiceAccount
  name: {{ include "registration-engine.name" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
The Azure Marketplace's values, or an empty dict outside Azure.
*/}}
{{- define "registration-engine.azure" -}}
{{- $g := .Values.global | default dict -}}
{{- toYaml ($g.azure | default dict) -}}
{{- end }}

{{/*
The engine's image. Every image reference of the chart goes through here (a
test checks it):
  - Azure Marketplace: global.azure.images.engine → registry/image@digest, or
    registry/image:tag without a digest. Marketplace relocates images into its
    own registry and rewrites these values, so nothing here names a registry.
  - otherwise Rancher's convention: global.cattle.systemDefaultRegistry +
    image.repository:image.tag (tag defaults to the chart's appVersion).
*/}}
{{- define "registration-engine.image" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- $img := dig "images" "engine" dict $azure -}}
{{- if $img.image -}}
  {{- $ref := $img.image -}}
  {{- if $img.registry }}{{ $ref = printf "%s/%s" (trimSuffix "/" $img.registry) $img.image }}{{ end -}}
  {{- if $img.digest -}}
    {{- printf "%s@%s" $ref $img.digest -}}
  {{- else if $img.tag -}}
    {{- printf "%s:%s" $ref (toString $img.tag) -}}
  {{- else -}}
    {{- fail "global.azure.images.engine needs a digest (or a tag)" -}}
  {{- end -}}
{{- else -}}
  {{- $reg := dig "cattle" "systemDefaultRegistry" "" (.Values.global | default dict) -}}
  {{- $repo := required "image.repository is required" .Values.image.repository -}}
  {{- if $reg }}{{ $repo = printf "%s/%s" (trimSuffix "/" $reg) $repo }}{{ end -}}
  {{- printf "%s:%s" $repo (toString (.Values.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}
{{- end }}

{{/*
AZURE_CREDENTIAL_MODE: azure.credentialMode, or managed-identity when Azure
injected global.azure.identity.clientId, workload-identity otherwise.
*/}}
{{- define "registration-engine.credentialMode" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- $mode := .Values.azure.credentialMode | default "" -}}
{{- if not $mode -}}
  {{- $mode = ternary "managed-identity" "workload-identity" (not (empty (dig "identity" "clientId" "" $azure))) -}}
{{- end -}}
{{- if not (has $mode (list "workload-identity" "managed-identity")) -}}
  {{- fail (printf "azure.credentialMode %q: use workload-identity or managed-identity" $mode) -}}
{{- end -}}
{{- $mode -}}
{{- end }}

{{/*
The managed identity's client ID (managed-identity mode).
*/}}
{{- define "registration-engine.managedIdentityClientId" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- required "managed-identity mode needs global.azure.identity.clientId" (dig "identity" "clientId" "" $azure) -}}
{{- end }}

{{- define "registration-engine.extensionResourceId" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- dig "extension" "resourceId" "" $azure | default .Values.azure.extensionResourceId -}}
{{- end }}

{{- define "registration-engine.planId" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- dig "marketplace" "planId" "" $azure | default .Values.marketplace.planId -}}
{{- end }}

{{/*
The region-server certificates: the chart's certs/*.pem, then
regionServerCerts (same file name wins). A YAML map of file name → PEM.
*/}}
{{- define "registration-engine.regionServerCerts" -}}
{{- $certs := dict -}}
{{- range $path, $_ := .Files.Glob "certs/*.pem" -}}
  {{- $_ := set $certs (base $path) ($.Files.Get $path) -}}
{{- end -}}
{{- range $name, $pem := .Values.regionServerCerts -}}
  {{- $_ := set $certs $name $pem -}}
{{- end -}}
{{- toYaml $certs -}}
{{- end }}

{{/*
updateServerDomains, checked: each a DNS name (it lands in the CronJob's
UPDATE_SERVER_DOMAINS and in the CoreDNS admission policy's CEL).
*/}}
{{- define "registration-engine.updateServerDomains" -}}
{{- $domains := required "updateServerDomains needs at least one domain" .Values.updateServerDomains -}}
{{- range $domains -}}
  {{- if not (regexMatch "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?([.][a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$" (toString .)) -}}
    {{- fail (printf "updateServerDomains: %q is not a lower-case DNS name with a dot" (toString .)) -}}
  {{- end -}}
{{- end -}}
{{- join "," $domains -}}
{{- end }}

{{/*
updateServerDomains as the elements of a CEL list: 'a.example', 'b.example'.
*/}}
{{- define "registration-engine.updateServerDomainsCEL" -}}
{{- $out := list -}}
{{- range splitList "," (include "registration-engine.updateServerDomains" .) -}}
  {{- $out = append $out (printf "'%s'" .) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end }}
