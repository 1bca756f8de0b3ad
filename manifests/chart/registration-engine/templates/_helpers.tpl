{{/*
The names are fixed, not derived from the release: the Role grants the
Secret and the Lease by name, the engine recognises its scheduled Jobs by
the CronJob's name (CRONJOB_NAME), and rancher/scc-operator and the README
expect these.
*/}}
{{- define "registration-engine.name" -}}registration-engine{{- end }}

{{/*
The labels of every object the chart renders (Kubernetes' recommended
app.kubernetes.io/* and Helm's helm.sh/chart): kubectl get -l
app.kubernetes.io/instance=<release> finds all of a release. A template the
chart gains includes this, and a test checks every rendered object carries
them. Never put them on the Secret scc-registration: rancher/scc-operator
refuses to adopt a Secret labelled app.kubernetes.io/managed-by, and the
engine, not the chart, writes that one.
*/}}
{{- define "registration-engine.labels" -}}
app.kubernetes.io/name: {{ include "registration-engine.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: registration
app.kubernetes.io/part-of: rancher
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels of the engine's pods: the chart's, podLabels (which cannot
replace the chart's), and those Azure acts on. A YAML map.
*/}}
{{- define "registration-engine.podLabels" -}}
{{- $labels := merge (include "registration-engine.labels" . | fromYaml) (deepCopy (.Values.podLabels | default dict)) -}}
{{- if eq (include "registration-engine.credentialMode" .) "workload-identity" -}}
  {{- /* Makes the Workload Identity webhook inject the federated token
  and AZURE_CLIENT_ID / AZURE_TENANT_ID / AZURE_FEDERATED_TOKEN_FILE. */ -}}
  {{- $_ := set $labels "azure.workload.identity/use" "true" -}}
{{- end -}}
{{- if (eq (toString .Values.marketplace.billingLabel) "true") -}}
  {{- $_ := set $labels "azure-extensions-usage-release-identifier" .Release.Name -}}
{{- end -}}
{{- toYaml $labels -}}
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
    image.repository:image.tag (tag defaults to the chart's appVersion), or
    image.repository@image.digest; global.imageRegistry (a parent chart's
    convention) when systemDefaultRegistry is not set.
values.schema.json gives each part a pattern; the reference as a whole is
checked again here, because it also lands in the status command NOTES print
for a person to paste into a shell: only letters, digits and . _ - : / @.
*/}}
{{- define "registration-engine.image" -}}
{{- with include "registration-engine.imageProblem" . -}}
  {{- fail . -}}
{{- end -}}
{{- include "registration-engine.imageRef" . -}}
{{- end }}

{{/*
The refusal of an image reference with a character no image reference has,
or "" (registration-engine.image fails with it; registration-engine.validate
lists it, so that helm lint fails too).
*/}}
{{- define "registration-engine.imageProblem" -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- $img := dig "images" "engine" dict $azure -}}
{{- /* An image not given yet is the placeholder checks' to name. */ -}}
{{- $given := ternary (and $img.image (or $img.digest $img.tag)) .Values.image.repository (not (empty $img.image)) -}}
{{- $ref := "" -}}
{{- if $given }}{{ $ref = include "registration-engine.imageRef" . }}{{ end -}}
{{- if and $given (not (regexMatch "^[a-zA-Z0-9._:/@-]+$" $ref)) -}}
the engine's image {{ printf "%q" $ref }} has a character no image reference has (letters, digits and . _ - : / @ only): check global.azure.images.engine, or image and global.cattle.systemDefaultRegistry
{{- else if and $given (not (regexMatch "@[A-Z_]+@" $ref)) (regexMatch "^/|//|/$|/[:@]" $ref) -}}
the engine's image {{ printf "%q" $ref }} has an empty path component ("/" at either end, or "//"): no registry serves it and the pod would never pull it; check global.azure.images.engine, or image.repository and global.cattle.systemDefaultRegistry (give the registry without a trailing /)
{{- end -}}
{{- end }}

{{/*
The engine's image reference as the values give it, unchecked: only
registration-engine.image calls it.
*/}}
{{- define "registration-engine.imageRef" -}}
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
  {{- $g := .Values.global | default dict -}}
  {{- $reg := dig "cattle" "systemDefaultRegistry" "" $g | default (dig "imageRegistry" "" $g) -}}
  {{- $repo := required "image.repository is required" .Values.image.repository -}}
  {{- if $reg }}{{ $repo = printf "%s/%s" (trimSuffix "/" $reg) $repo }}{{ end -}}
  {{- if .Values.image.digest -}}
    {{- printf "%s@%s" $repo .Values.image.digest -}}
  {{- else -}}
    {{- printf "%s:%s" $repo (toString (.Values.image.tag | default .Chart.AppVersion)) -}}
  {{- end -}}
{{- end -}}
{{- end }}

{{/*
The pod's imagePullSecrets: imagePullSecrets, then a parent chart's
global.imagePullSecrets (names, or {name: …}), each once. A YAML list, or
"" when there is none.
*/}}
{{- define "registration-engine.imagePullSecrets" -}}
{{- $names := list -}}
{{- range (concat (.Values.imagePullSecrets | default list) (dig "imagePullSecrets" list (.Values.global | default dict))) -}}
  {{- $n := ternary (dig "name" "" (kindIs "map" . | ternary . dict)) (toString .) (kindIs "map" .) -}}
  {{- if and $n (not (has $n $names)) }}{{ $names = append $names $n }}{{ end -}}
{{- end -}}
{{- range $names }}
- name: {{ . }}
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

{{/*
The extension's ID and the plan: what Azure injected (global.azure.*) when it
did, else what the bundle's mainTemplate.json passes (azure.extensionResourceId
from the cluster and extension names, marketplace.planId from Partner
Center's plan-name), so that no billing model depends on the injection.
Partner Center documents the injection for the custom-meter model only.
An injection left at DONOTMODIFY counts as none when the explicit value is
set. registration-engine.injectedSource names where the value came from;
registration-engine.validate refuses the two when both are set and differ.
Called with (list ROOT INJECTED-PATH EXPLICIT-VALUE).
*/}}
{{- define "registration-engine.injectedOr" -}}
{{- $root := index . 0 -}}
{{- $azure := include "registration-engine.azure" $root | fromYaml -}}
{{- $injected := dig (index . 1) (index . 2) "" $azure | toString -}}
{{- $explicit := index . 3 | default "" | toString -}}
{{- if and $explicit (or (not $injected) (eq $injected "DONOTMODIFY")) -}}
{{- $explicit -}}
{{- else -}}
{{- $injected | default $explicit -}}
{{- end -}}
{{- end }}

{{- define "registration-engine.extensionResourceId" -}}
{{- include "registration-engine.injectedOr" (list . "extension" "resourceId" .Values.azure.extensionResourceId) -}}
{{- end }}

{{- define "registration-engine.planId" -}}
{{- include "registration-engine.injectedOr" (list . "marketplace" "planId" .Values.marketplace.planId) -}}
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
UPDATE_SERVER_DOMAINS and in the CoreDNS admission policy's CEL), and none
the cluster domain (cluster.local), under it (svc.cluster.local) or covering
it: the policy would then admit, under the engine's token, an entry for
kubernetes.default.svc.cluster.local. The engine refuses the same at load
(smt.CheckDomain); "local" and "" are refused above as no name with a dot.
*/}}
{{- define "registration-engine.updateServerDomains" -}}
{{- $domains := required "updateServerDomains needs at least one domain" .Values.updateServerDomains -}}
{{- range $domains -}}
  {{- if not (regexMatch "^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?([.][a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$" (toString .)) -}}
    {{- fail (printf "updateServerDomains: %q is not a lower-case DNS name with a dot" (toString .)) -}}
  {{- end -}}
  {{- with include "registration-engine.clusterDomainProblem" (toString .) -}}
    {{- fail . -}}
  {{- end -}}
{{- end -}}
{{- join "," $domains -}}
{{- end }}

{{/*
registrationCode without the white space around it ("" when none is
given: then the engine's runs end waiting for one, RegistrationCodeMissing).
The engine trims and checks it again at load (job/regcode.go).
*/}}
{{- define "registration-engine.registrationCode" -}}
{{- .Values.registrationCode | default "" | toString | trim -}}
{{- end }}

{{/*
The refusal of a registrationCode that cannot be a code, or "": white space
or a control character inside, or a placeholder. The message never quotes
the value (a schema pattern would: helm prints the value it refuses, and
Azure shows that message in the extension's status).
*/}}
{{- define "registration-engine.registrationCodeProblem" -}}
{{- $code := include "registration-engine.registrationCode" . -}}
{{- if and $code (regexMatch "[\\s\\x00-\\x1f\\x7f]" $code) -}}
registrationCode: white space or a control character inside the code (not shown here); set the code alone, as SUSE Customer Center shows it
{{- else if and $code (regexMatch "(?i)^(replace[-_]?me.*|donotmodify|changeme|change[-_]me|<.*>|\\$\\{.*\\}|\\{\\{.*\\}\\}|[x-]+)$" $code) -}}
registrationCode: a placeholder, not a code (not shown here); set the code SUSE Customer Center shows for the subscription, or leave it empty until you have one
{{- end -}}
{{- end }}

{{/*
Azure.proxySettings, which Azure Arc's extension manager passes every
extension chart (docs/install.md, "Behind a proxy"), under the keys
Microsoft's own extension charts read (Azure Monitor's ama-logs):
isProxyEnabled, httpsProxy, httpProxy, noProxy (comma-separated),
proxyCert (a PEM CA certificate, as content) and isCustomCert (not used:
a proxyCert is trusted whenever it is given, since Arc also passes one
alone, for a TLS-inspecting proxy on the way without a proxy endpoint). A
YAML map, empty when Azure passed none.
*/}}
{{- define "registration-engine.proxySettings" -}}
{{- toYaml (dig "proxySettings" dict (.Values.Azure | default dict)) -}}
{{- end }}

{{/*
"true" when Azure.proxySettings.isProxyEnabled is (true, or the string
"true" in any case), "" otherwise.
*/}}
{{- define "registration-engine.proxyEnabled" -}}
{{- $ps := include "registration-engine.proxySettings" . | fromYaml -}}
{{- if eq (lower (toString (dig "isProxyEnabled" false $ps))) "true" }}true{{ end -}}
{{- end }}

{{/*
The names extraEnv sets, as a YAML list.
*/}}
{{- define "registration-engine.extraEnvNames" -}}
{{- $names := list -}}
{{- range (.Values.extraEnv | default list) }}{{ $names = append $names (toString .name) }}{{ end -}}
{{- toYaml $names -}}
{{- end }}

{{/*
Azure.proxySettings' proxy variables for the engine's container, each
only when set and isProxyEnabled is true: HTTPS_PROXY (Entra, ARM, the
region servers, a metadata_server), HTTP_PROXY (the attested document's
intermediate certificate, fetched over http://), NO_PROXY. A variable
extraEnv names, in either case, is the user's: the chart then leaves its
own out (Go reads HTTPS_PROXY before https_proxy, so the chart's upper-case
variable would hide the user's lower-case one). A map of name → value.
*/}}
{{- define "registration-engine.proxyVars" -}}
{{- $ps := include "registration-engine.proxySettings" . | fromYaml -}}
{{- $user := list -}}
{{- range (include "registration-engine.extraEnvNames" . | fromYamlArray) }}{{ $user = append $user (upper .) }}{{ end -}}
{{- $out := dict -}}
{{- if include "registration-engine.proxyEnabled" . -}}
  {{- range $name, $key := dict "HTTPS_PROXY" "httpsProxy" "HTTP_PROXY" "httpProxy" "NO_PROXY" "noProxy" -}}
    {{- $v := index $ps $key | default "" -}}
    {{- if kindIs "slice" $v }}{{ $v = join "," $v }}{{ end -}}
    {{- $v = toString $v | trim -}}
    {{- if and $v (not (has $name $user)) }}{{ $_ := set $out $name $v }}{{ end -}}
  {{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end }}

{{/*
The Secret that holds the proxy URLs Azure passed (secret.yaml), and its
keys: the variables of registration-engine.proxyVars that are URLs, which
may carry a user:password. The pods reference it (secretKeyRef), so that the
password is in no pod spec, readable with Kubernetes' view role or by
whoever may list pods. NO_PROXY holds no credential: a plain value.
*/}}
{{- define "registration-engine.proxySecretName" -}}
{{- include "registration-engine.name" . }}-proxy
{{- end }}
{{- define "registration-engine.proxySecretKeys" -}}
{{- $keys := list -}}
{{- range $k, $_ := include "registration-engine.proxyVars" . | fromYaml -}}
  {{- if has $k (list "HTTPS_PROXY" "HTTP_PROXY") }}{{ $keys = append $keys $k }}{{ end -}}
{{- end -}}
{{- toYaml $keys -}}
{{- end }}

{{/*
Azure.proxySettings.proxyCert as PEM (given as PEM, or as the base64 of
one), or "" when none or no certificate.
*/}}
{{- define "registration-engine.proxyCert" -}}
{{- $ps := include "registration-engine.proxySettings" . | fromYaml -}}
{{- $c := toString (dig "proxyCert" "" $ps | default "") | trim -}}
{{- if and $c (not (contains "-----BEGIN" $c)) -}}
  {{- /* b64dec answers an error's text for what is no base64. */ -}}
  {{- $c = b64dec (regexReplaceAll "\\s+" $c "") | trim -}}
{{- end -}}
{{- if regexMatch "-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----" $c }}{{ $c }}{{ end -}}
{{- end }}

{{/*
Where the engine's container finds proxyCert (the ConfigMap
registration-engine-proxy-ca), and the SSL_CERT_DIR that adds it to the
system roots. Go on Linux (crypto/x509 root_unix.go loadSystemRoots,
root_linux.go) reads one bundle file, SSL_CERT_FILE or else the first of
its known files (distroless/static's /etc/ssl/certs/ca-certificates.crt),
and then every file of each directory in SSL_CERT_DIR (colon-separated),
which replaces its default directories /etc/ssl/certs and
/etc/pki/tls/certs; it skips a symlink to a name in the same directory
(the ConfigMap volume's ..data) and what it cannot read as a file. So
SSL_CERT_DIR lists this directory and those two: the system roots stay,
from the bundle file and the directories alike, and an SSL_CERT_FILE of the
user's (extraEnv, a TLS-inspecting proxy's bundle) still applies beside
it. SSL_CERT_FILE pointing at the certificate would also keep the system
roots on distroless/static (its bundle lies in /etc/ssl/certs, which Go
reads anyway), but would take the place of the user's SSL_CERT_FILE and,
on an image whose bundle lies elsewhere, of the system roots.
*/}}
{{- define "registration-engine.proxyCertDir" -}}/etc/registration-engine/proxy-ca{{- end }}
{{- define "registration-engine.sslCertDir" -}}
{{- include "registration-engine.proxyCertDir" . }}:/etc/ssl/certs:/etc/pki/tls/certs
{{- end }}

{{/*
A proxy URL as a message may show it: whatever lies between "//" (or the
start, without a scheme) and the LAST "@" replaced by ***, so that a
password holding "/", "#", "?" or "@" never shows. Masking to the last
"@" of the whole value hides more than the user information when a path
holds one; a proxy URL with a path is refused anyway.
*/}}
{{- define "registration-engine.maskedURL" -}}
{{- regexReplaceAll "(?s)^([^/]*//)?.*@" (toString .) "${1}***@" -}}
{{- end }}

{{/*
What is wrong with a proxy URL, or "" (called with (list name value)): the
value as a message shows it, masked. The engine's Go reads a proxy variable
with net/url (golang.org/x/net/http/httpproxy): a URL it cannot parse is
dropped, and every request then goes direct, so the chart refuses
  - no scheme Go's proxy dialer knows (http, https, socks5, socks5h), or
    more than scheme://[user:password@]host[:port][/];
  - user information with a character a URL must percent-encode ("/", "?",
    "#", a space: Go would end the host there) or a "%" not followed by two
    hexadecimal digits (url.Parse's "invalid URL escape"). "@" is taken, as
    Go takes the last "@" of the authority;
  - a port outside 1-65535 (url.Parse takes any digits; the dial fails).
*/}}
{{- define "registration-engine.proxyURLProblem" -}}
{{- $name := index . 0 -}}
{{- $v := toString (index . 1) | trim -}}
{{- $shown := include "registration-engine.maskedURL" $v -}}
{{- $scheme := regexMatch "^(?i:https?|socks5h?)://" $v -}}
{{- $rest := regexReplaceAll "^(?i:https?|socks5h?)://" $v "" -}}
{{- $user := "" -}}
{{- if contains "@" $rest -}}
  {{- $user = regexFind "(?s)^.*@" $rest | trimSuffix "@" -}}
  {{- $rest = trimPrefix (printf "%s@" $user) $rest -}}
{{- end -}}
{{- $port := regexFind ":[0-9]{1,5}/?$" $rest | trimPrefix ":" | trimSuffix "/" -}}
{{- if or (not $scheme) (not (regexMatch "^(\\[[0-9a-fA-F:.]+\\]|[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?)(:[0-9]{1,5})?/?$" $rest)) -}}
  {{- printf "%s %q: not a proxy URL; give scheme, host and port, such as http://proxy.example:3128 (the schemes Go reads: http, https, socks5, socks5h)" $name $shown -}}
{{- else if not (regexMatch "^([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})*$" $user) -}}
  {{- printf "%s %q: the user name or password (not shown) holds a character Go cannot read in a URL, so the engine would drop the proxy and go direct; percent-encode it (%%2F for /, %%3F for ?, %%23 for #, %%25 for %%, %%20 for a space)" $name $shown -}}
{{- else if and $port (or (lt (atoi $port) 1) (gt (atoi $port) 65535)) -}}
  {{- printf "%s %q: port %s is out of range 1-65535; give the proxy's port, such as 3128" $name $shown $port -}}
{{- end -}}
{{- end }}

{{/*
The refusals of Azure.proxySettings, or "": a proxy enabled without a proxy,
a proxy URL the engine could not use (registration-engine.proxyURLProblem),
a proxyCert that holds no certificate. The proxy URLs are checked only
while isProxyEnabled is true: otherwise the chart does not use them.
*/}}
{{- define "registration-engine.proxyProblems" -}}
{{- $ps := include "registration-engine.proxySettings" . | fromYaml -}}
{{- $problems := list -}}
{{- if include "registration-engine.proxyEnabled" . -}}
  {{- $any := false -}}
  {{- range $key := list "httpsProxy" "httpProxy" -}}
    {{- $v := toString (index $ps $key | default "") | trim -}}
    {{- if $v }}{{ $any = true }}{{ end -}}
    {{- with and $v (include "registration-engine.proxyURLProblem" (list (printf "Azure.proxySettings.%s" $key) $v)) -}}
      {{- $problems = append $problems . -}}
    {{- end -}}
  {{- end -}}
  {{- if not $any -}}
    {{- $problems = append $problems "Azure.proxySettings.isProxyEnabled is true, but neither Azure.proxySettings.httpsProxy nor httpProxy is set: give the proxy's URL (httpsProxy=http://proxy.example:3128), or set isProxyEnabled=false" -}}
  {{- end -}}
{{- end -}}
{{- if and (toString (dig "proxyCert" "" $ps | default "") | trim) (not (include "registration-engine.proxyCert" .)) -}}
  {{- $problems = append $problems "Azure.proxySettings.proxyCert holds no certificate: give the proxy's CA certificate as PEM (-----BEGIN CERTIFICATE----- …), or leave it empty" -}}
{{- end -}}
{{- range $i, $e := (.Values.extraEnv | default list) -}}
  {{- if and (has (upper (toString $e.name)) (list "HTTPS_PROXY" "HTTP_PROXY")) (hasKey $e "value") -}}
    {{- with include "registration-engine.proxyURLProblem" (list (printf "extraEnv[%d] %s" $i $e.name) (toString $e.value)) -}}
      {{- $problems = append $problems . -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- toYaml $problems -}}
{{- end }}

{{/*
resources.limits.memory in MiB (Ki, Mi, Gi, K, M, G or bytes), or "" when
there is none or it is no quantity the chart reads.
*/}}
{{- define "registration-engine.memoryLimitMiB" -}}
{{- $m := dig "limits" "memory" "" (.Values.resources | default dict) | toString -}}
{{- $n := regexFind "^[0-9]+" $m -}}
{{- $unit := trimPrefix $n $m -}}
{{- $f := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "K" 1000 "M" 1000000 "G" 1000000000 "" 1 -}}
{{- if and $n (lt (len $n) 13) (hasKey $f $unit) -}}
{{- div (mul ($n | atoi) (index $f $unit)) 1048576 -}}
{{- end -}}
{{- end }}

{{/*
A memory quantity in bytes, as Kubernetes reads it (a number, with a
decimal suffix k M G T P E, a binary one Ki Mi Gi Ti Pi Ei, or an exponent
e3), or "" when it is none: the API server refuses such a pod at install.
*/}}
{{- define "registration-engine.memoryBytes" -}}
{{- $m := include "registration-engine.durationText" . -}}
{{- $f := dict "" 1.0 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0 "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if regexMatch "^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$" $m -}}
  {{- $n := regexFind "^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)" $m -}}
  {{- mulf (float64 (trimPrefix "+" $n)) (index $f (trimPrefix $n $m)) | printf "%.0f" -}}
{{- else if regexMatch "^[+]?[0-9]+[eE][0-9]+$" $m -}}
  {{- $p := regexSplit "[eE]" (trimPrefix "+" $m) -1 -}}
  {{- if lt (atoi (index $p 1)) 19 -}}
    {{- $b := float64 (index $p 0) -}}
    {{- range until (atoi (index $p 1)) }}{{ $b = mulf $b 10 }}{{ end -}}
    {{- printf "%.0f" $b -}}
  {{- end -}}
{{- end -}}
{{- end }}

{{/*
The values of one field of a cron expression (its text, its least and its
greatest value), ascending, comma-separated: *, ?, numbers, names
(jan…dec, sun…sat), ranges, lists and steps, as robfig/cron (Kubernetes'
parser) reads them. Day of week 7 is Sunday, 0. Called with (list field lo
hi) on a field registration-engine.scheduleProblem accepted.
*/}}
{{- define "registration-engine.cronValues" -}}
{{- $field := lower (index . 0) -}}
{{- $lo := int (index . 1) }}{{ $hi := int (index . 2) -}}
{{- $names := dict "jan" "1" "feb" "2" "mar" "3" "apr" "4" "may" "5" "jun" "6" "jul" "7" "aug" "8" "sep" "9" "oct" "10" "nov" "11" "dec" "12" "sun" "0" "mon" "1" "tue" "2" "wed" "3" "thu" "4" "fri" "5" "sat" "6" -}}
{{- $set := dict -}}
{{- range splitList "," $field -}}
  {{- $item := . -}}
  {{- range $n, $v := $names }}{{ $item = replace $n $v $item }}{{ end -}}
  {{- $step := 1 -}}
  {{- if contains "/" $item }}{{ $step = splitList "/" $item | last | atoi }}{{ $item = splitList "/" $item | first }}{{ end -}}
  {{- $from := $lo }}{{ $to := $hi -}}
  {{- if not (has $item (list "*" "?")) -}}
    {{- $from = splitList "-" $item | first | atoi -}}
    {{- $to = ternary (splitList "-" $item | last | atoi) (ternary $hi $from (contains "/" .)) (contains "-" $item) -}}
  {{- end -}}
  {{- range untilStep (int $from) (int (add $to 1)) (int $step) -}}
    {{- $_ := set $set (toString (ternary 0 . (and (eq $hi 7) (eq . 7)))) true -}}
  {{- end -}}
{{- end -}}
{{- $out := list -}}
{{- range untilStep $lo (int (add $hi 1)) 1 }}{{ if hasKey $set (toString .) }}{{ $out = append $out (toString .) }}{{ end }}{{ end -}}
{{- join "," $out -}}
{{- end }}

{{/*
The least gap between two values of a cyclic field (comma-separated,
ascending) whose cycle is n long: the gaps between neighbours and the one
from the last round to the first. Called with (list values n).
*/}}
{{- define "registration-engine.cyclicGap" -}}
{{- $v := list }}{{ range splitList "," (index . 0) }}{{ $v = append $v (atoi .) }}{{ end -}}
{{- $gap := add (index . 1) (sub (first $v) (last $v)) -}}
{{- range $i, $x := initial $v }}{{ $gap = min $gap (sub (index $v (add $i 1)) $x) }}{{ end -}}
{{- $gap -}}
{{- end }}

{{/*
The least gap, in seconds, between two consecutive runs of a schedule
registration-engine.scheduleProblem accepted, or "" when it is not one
the chart can tell. Macros: @hourly 1 h, @daily and @midnight a day,
@weekly a week, @monthly 28 days, @yearly a year, @every its duration.
Five fields: the minute is one number (scheduleProblem), so the runs of a
day are the hours of the hour field, and the gap is the least of those
hours' gaps and the one from a day's last run to the next run day's first:
run days 1 apart when day-of-month and day-of-week are both * (the month
field only lengthens gaps), the least gap of the days of the week (mod 7)
when only day-of-week is set, the least gap of the days of the month, or
from the last round to the first in the shortest month (28 days), when
only day-of-month is, and 1 when both are (cron then runs on either).
*/}}
{{- define "registration-engine.scheduleGap" -}}
{{- $s := . -}}
{{- $macros := dict "@hourly" 3600 "@daily" 86400 "@midnight" 86400 "@weekly" 604800 "@monthly" 2419200 "@yearly" 31536000 "@annually" 31536000 -}}
{{- if hasKey $macros (lower $s) -}}
  {{- index $macros (lower $s) -}}
{{- else if hasPrefix "@every " $s -}}
  {{- include "registration-engine.seconds" (list "schedule" (trimPrefix "@every " $s)) -}}
{{- else -}}
  {{- $f := regexSplit "\\s+" $s -1 -}}
  {{- if eq (len $f) 5 -}}
    {{- $any := list "*" "?" -}}
    {{- $dom := index $f 2 }}{{ $dow := index $f 4 -}}
    {{- $days := 1 -}}
    {{- if and (has $dom $any) (not (has $dow $any)) -}}
      {{- $days = include "registration-engine.cyclicGap" (list (include "registration-engine.cronValues" (list $dow 0 7)) 7) | atoi -}}
    {{- else if and (not (has $dom $any)) (has $dow $any) -}}
      {{- $days = include "registration-engine.cyclicGap" (list (include "registration-engine.cronValues" (list $dom 1 31)) 28) | atoi | max 1 -}}
    {{- end -}}
    {{- $hours := include "registration-engine.cronValues" (list (index $f 1) 0 23) -}}
    {{- mul 3600 (include "registration-engine.cyclicGap" (list $hours (mul 24 $days)) | atoi) -}}
  {{- end -}}
{{- end -}}
{{- end }}

{{/*
What is wrong with one clusterAddressRanges entry, or "": not a CIDR Go's
net/netip.ParsePrefix reads (the engine's reading of CLUSTER_ADDRESS_RANGES,
job/incluster/coredns ParseClusterRanges): IPv4 octets 0-255 without
leading zeros and a prefix of 0-32, or IPv6 groups of 1-4 hexadecimal
digits (at most one "::") and a prefix of 0-128. Called with (list index
value).
*/}}
{{- define "registration-engine.cidrProblem" -}}
{{- $v := toString (index . 1) -}}
{{- $octet := "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])" -}}
{{- $ok := false -}}
{{- if regexMatch (printf "^%s([.]%s){3}/(3[0-2]|[12]?[0-9])$" $octet $octet) $v -}}
  {{- $ok = true -}}
{{- else if regexMatch "^[0-9a-fA-F:]+/(12[0-8]|1[01][0-9]|[1-9]?[0-9])$" $v -}}
  {{- $addr := splitList "/" $v | first -}}
  {{- $halves := splitList "::" $addr -}}
  {{- $groups := list -}}
  {{- range $halves }}{{ if . }}{{ $groups = concat $groups (splitList ":" .) }}{{ end }}{{ end -}}
  {{- $valid := true -}}
  {{- range $groups }}{{ if not (regexMatch "^[0-9a-fA-F]{1,4}$" .) }}{{ $valid = false }}{{ end }}{{ end -}}
  {{- if eq (len $halves) 1 }}{{ $ok = and $valid (eq (len $groups) 8) }}{{ else if eq (len $halves) 2 }}{{ $ok = and $valid (lt (len $groups) 8) }}{{ end -}}
{{- end -}}
{{- if not $ok -}}
clusterAddressRanges[{{ index . 0 }}] {{ printf "%q" $v }}: not a CIDR the engine reads (an IPv4 address of four numbers 0-255 and a prefix of 0-32, or an IPv6 one and 0-128), so every run would stop at load (exit 2); write it as 10.0.0.0/8 or fc00::/7
{{- end -}}
{{- end }}

{{/*
GOMEMLIMIT: three quarters of the memory limit (48MiB under the default
64Mi), so that the Go runtime collects garbage before the limit kills the
pod; 48MiB when the limit is none the chart reads.
*/}}
{{- define "registration-engine.goMemLimit" -}}
{{- with include "registration-engine.memoryLimitMiB" . -}}
{{- printf "%dMiB" (div (mul (atoi .) 3) 4) -}}
{{- else -}}
48MiB
{{- end -}}
{{- end }}

{{/*
The variables the chart sets from its values, each with the value that
sets it: extraEnv may not set them (past the schema's checks, or twice).
*/}}
{{- define "registration-engine.chartEnv" -}}
AZURE_CREDENTIAL_MODE: azure.credentialMode
AZURE_CLIENT_ID: global.azure.identity.clientId or azure.workloadIdentity.clientId
EXTENSION_RESOURCE_ID: azure.extensionResourceId
MARKETPLACE_PUBLISHER_ID: marketplace.publisherId
MARKETPLACE_OFFER_ID: marketplace.offerId
MARKETPLACE_PLAN_ID: marketplace.planId
REGISTRATION_CODE: registrationCode
REG_CODE: registrationCode
REGCODE: registrationCode
REGIONSRV_CONFIG: regionServers
RUN_DEADLINE: runDeadline
STARTUP_SLEEP_MAX: startupSleepMax
IN_CLUSTER_DNS: inClusterDNS
UPDATE_SERVER_DOMAINS: updateServerDomains
CLUSTER_ADDRESS_RANGES: clusterAddressRanges
OPERATOR_RECOVERY: operatorRecovery
LOG_LEVEL: logLevel
REGISTRATION_ENGINE_LOG_LEVEL: logLevel
LOG_FORMAT: logFormat
GOMEMLIMIT: resources.limits.memory
POD_NAME: the chart (downward API)
POD_NAMESPACE: the chart (downward API)
JOB_NAME: the chart (downward API)
JOB_UID: the chart (downward API)
CRONJOB_NAME: the chart
REGISTRATION_SECRET_NAME: the chart (rancher/scc-operator reads scc-registration)
REGISTRATION_SECRET_NAMESPACE: the chart (the release's namespace)
LEASE_NAME: the chart
{{- end }}

{{/*
The refusal of one updateServerDomains entry that is, or lies under, the
cluster domain, or "" (registration-engine.updateServerDomains fails with
it; registration-engine.validate lists it, so that helm lint fails too).
*/}}
{{- define "registration-engine.clusterDomainProblem" -}}
{{- if or (eq . "cluster.local") (hasSuffix ".cluster.local" .) -}}
updateServerDomains: {{ printf "%q" . }} is, or lies under, the cluster domain cluster.local, where the cluster's Services resolve (kubernetes.default.svc.cluster.local): the CoreDNS admission policy would let the engine map them; list only the update servers' domains, such as susecloud.net
{{- end -}}
{{- end }}

{{/*
updateServerDomains as the elements of a CEL list: 'a.example', 'b.example'.
*/}}
{{/*
clusterAddressRanges as a CEL list of strings, for the CoreDNS admission
policy's clusterRanges (the schema admits CIDRs only: no quote reaches CEL).
*/}}
{{- define "registration-engine.clusterAddressRangesCEL" -}}
{{- $out := list -}}
{{- range .Values.clusterAddressRanges -}}
  {{- $out = append $out (printf "'%s'" .) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end }}

{{- define "registration-engine.updateServerDomainsCEL" -}}
{{- $out := list -}}
{{- range splitList "," (include "registration-engine.updateServerDomains" .) -}}
  {{- $out = append $out (printf "'%s'" .) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end }}

{{- define "registration-engine.decimal" -}}
{{- /* A number written out in full, to the nanosecond and no further, with
no trailing zeros: 1.5 → "1.5", 3600.0 → "3600". */ -}}
{{- regexReplaceAll "\\.?0*$" (printf "%.12f" .) "" -}}
{{- end }}

{{/*
Durations (startupSleepMax, runDeadline, jobDeadline, a schedule's @every)
take what the engine takes (job/parse.go parseDuration): Go's
time.ParseDuration form, one or more decimal numbers each with a unit (ns,
us, µs, ms, s, m, h: "1.5h", "90m", "1h30m", "500ms"), or plain seconds,
fractions allowed ("3600", "0.5"). The engine's float parser also takes
exponents and hexadecimal ("1e3", "0x1p4"); the chart does not: nobody
means a duration that way. values.schema.json admits strings and numbers
and leaves the form to registration-engine.durationProblem, whose message
says what to write (a schema pattern would print its regular expression).

registration-engine.durationText: the value as the engine will read it, a
number from a values file written out in full (YAML's 1.5 is 1.5, never
1.5e+00; 1e21 is its 22 digits, which the size check then refuses), a
string trimmed.
*/}}
{{- define "registration-engine.durationText" -}}
{{- $k := kindOf . -}}
{{- if or (eq $k "float64") (eq $k "float32") -}}
  {{- include "registration-engine.decimal" . -}}
{{- else if hasPrefix "int" $k -}}
  {{- printf "%d" . -}}
{{- else -}}
  {{- toString (. | default "") | trim -}}
{{- end -}}
{{- end }}

{{/*
A duration value in seconds, exact ("5400", "0.5"), or "" when it is none
of the forms above. Called with (list name value).
*/}}
{{- define "registration-engine.seconds" -}}
{{- $v := include "registration-engine.durationText" (index . 1) -}}
{{- $num := "([0-9]+([.][0-9]*)?|[.][0-9]+)" -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "μs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $unit := "(ns|us|µs|μs|ms|s|m|h)" -}}
{{- if regexMatch (printf "^[+]?%s$" $num) $v -}}
  {{- include "registration-engine.decimal" (float64 (trimPrefix "+" $v)) -}}
{{- else if regexMatch (printf "^[+]?(%s%s)+$" $num $unit) $v -}}
  {{- $total := 0.0 -}}
  {{- range regexFindAll (printf "%s%s" $num $unit) $v -1 -}}
    {{- $n := regexFind "^[0-9.]+" . -}}
    {{- $total = addf $total (mulf (float64 $n) (index $units (trimPrefix $n .))) -}}
  {{- end -}}
  {{- include "registration-engine.decimal" $total -}}
{{- end -}}
{{- end }}

{{/*
A duration value in whole seconds, rounded up (Kubernetes' deadlines are
integers: a Job given 107m0.5s gets 6421), or "" when it is none. Called
with (list name value).
*/}}
{{- define "registration-engine.wholeSeconds" -}}
{{- with include "registration-engine.seconds" . -}}
{{- printf "%d" (float64 . | ceil | int64) -}}
{{- end -}}
{{- end }}

{{/*
What is wrong with a duration value, or "": not one of the forms above, or
too large for the engine (Go's time.Duration holds 9223372036 s, about 292
years; the sum is taken in floating point, where 999999999999999999999
does not overflow as int64 did). Called with (list name value); an empty
value is none of this helper's business.
*/}}
{{- define "registration-engine.durationProblem" -}}
{{- $name := index . 0 -}}
{{- $v := include "registration-engine.durationText" (index . 1) -}}
{{- $s := include "registration-engine.seconds" . -}}
{{- if not $v -}}
{{- else if not $s -}}
  {{- printf "%s %q: not a duration; write it as Go does, numbers with units (1h, 1.5h, 90m, 1h30m, 500ms), or as seconds (3600)" $name $v -}}
{{- else if ge (float64 $s) 9223372036.0 -}}
  {{- printf "%s %s: too large; a duration such as 10m, 1h30m or 3600 (seconds)" $name $v -}}
{{- end -}}
{{- end }}

{{/*
A duration value as NOTES print it: whole seconds as a person reads them
(600 → 10m), a fraction of a second as written (500ms). Called with (list
name value).
*/}}
{{- define "registration-engine.durationHuman" -}}
{{- $s := include "registration-engine.seconds" . -}}
{{- if and $s (not (contains "." $s)) -}}
{{- include "registration-engine.human" (atoi $s) -}}
{{- else -}}
{{- include "registration-engine.durationText" (index . 1) -}}
{{- end -}}
{{- end }}

{{/*
Seconds as a duration a person reads: 6420 → 1h47m.
*/}}
{{- define "registration-engine.human" -}}
{{- $s := int . -}}
{{- $out := "" -}}
{{- if ge $s 3600 }}{{ $out = printf "%dh" (div $s 3600) }}{{ end -}}
{{- if mod (div $s 60) 60 }}{{ $out = printf "%s%dm" $out (mod (div $s 60) 60) }}{{ end -}}
{{- if mod $s 60 }}{{ $out = printf "%s%ds" $out (mod $s 60) }}{{ end -}}
{{- $out | default "0s" -}}
{{- end }}

{{/*
What a scheduled Job needs before its activeDeadlineSeconds, in seconds:
its pod may start up to 15 min after the schedule (image pull, a busy
node), sleeps up to startupSleepMax, runs up to runDeadline, and its two
retries (backoffLimit) run up to runDeadline each after about a minute of
backoff, without sleeping. Whole seconds, rounded up (a 500ms run
deadline counts as its 0.5 s three times, then the sum is rounded).
*/}}
{{- define "registration-engine.jobNeeds" -}}
{{- $sleep := include "registration-engine.seconds" (list "startupSleepMax" .Values.startupSleepMax) | default "0" | float64 -}}
{{- $run := include "registration-engine.seconds" (list "runDeadline" .Values.runDeadline) | default "0" | float64 -}}
{{- printf "%d" (addf 900 $sleep $run (mulf 2 (addf $run 60)) | ceil | int64) -}}
{{- end }}

{{/*
The Job's activeDeadlineSeconds: jobDeadline when set (validate refuses
one shorter than jobNeeds), else what a run needs rounded up to the hour:
2 h for the defaults (1 h sleep, 10 min run).
*/}}
{{- define "registration-engine.activeDeadlineSeconds" -}}
{{- $set := include "registration-engine.wholeSeconds" (list "jobDeadline" .Values.jobDeadline) -}}
{{- if $set -}}
  {{- $set -}}
{{- else -}}
  {{- $needs := include "registration-engine.jobNeeds" . | atoi -}}
  {{- mul (div (add $needs 3599) 3600) 3600 -}}
{{- end -}}
{{- end }}

{{/*
What is wrong with a cron schedule, or "". Kubernetes takes five fields
(minute hour day-of-month month day-of-week) or a macro; its API server
refuses anything else at install, after helm has already created the
release's other objects, and a value out of range never fires.
*/}}
{{- define "registration-engine.scheduleProblem" -}}
{{- $s := . -}}
{{- $macros := list "@yearly" "@annually" "@monthly" "@weekly" "@daily" "@midnight" "@hourly" -}}
{{- if hasPrefix "@" $s -}}
  {{- /* @every takes Go's duration form with units (Kubernetes parses
  it with time.ParseDuration), not plain seconds. */ -}}
  {{- $every := "" -}}
  {{- if and (hasPrefix "@every " $s) (regexMatch "[a-zµμ]$" $s) -}}
    {{- $every = include "registration-engine.seconds" (list "schedule" (trimPrefix "@every " $s)) -}}
  {{- end -}}
  {{- if not (or (has (lower $s) $macros) $every) -}}
    {{- printf "schedule %q: unknown macro; use five fields, @every <duration> or one of %s" $s (join ", " $macros) -}}
  {{- else if and $every (lt (float64 $every) 3600.0) -}}
    {{- printf "schedule %q: more often than once an hour; every cluster of the fleet would ask SUSE's servers that often (the default is twice a day)" $s -}}
  {{- end -}}
{{- else if regexMatch "^(CRON_)?TZ=" $s -}}
  {{- printf "schedule %q: no time zone in the schedule; the chart sets the CronJob's timeZone to Etc/UTC" $s -}}
{{- else -}}
  {{- $fields := regexSplit "\\s+" $s -1 -}}
  {{- if ne (len $fields) 5 -}}
    {{- printf "schedule %q: %d field(s), want 5 (minute hour day-of-month month day-of-week, e.g. \"0 */18 * * *\") or a macro such as @daily" $s (len $fields) -}}
  {{- else -}}
    {{- $specs := list (list "minute" 0 59) (list "hour" 0 23) (list "day-of-month" 1 31) (list "month" 1 12) (list "day-of-week" 0 7) -}}
    {{- $problem := "" -}}
    {{- range $i, $field := $fields -}}
      {{- $spec := index $specs $i -}}
      {{- $name := index $spec 0 -}}
      {{- $names := "" -}}
      {{- if eq $i 3 }}{{ $names = "|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec" }}{{ end -}}
      {{- if eq $i 4 }}{{ $names = "|sun|mon|tue|wed|thu|fri|sat" }}{{ end -}}
      {{- $any := ternary "[*?]" "[*]" (or (eq $i 2) (eq $i 4)) -}}
      {{- $atom := printf "([0-9]+%s)" $names -}}
      {{- $item := printf "^(%s|%s(-%s)?)(/[0-9]+)?$" $any $atom $atom -}}
      {{- range splitList "," (lower $field) -}}
        {{- if $problem -}}
        {{- else if not (regexMatch $item .) -}}
          {{- $problem = printf "schedule %q: %s field %q is not a number, range, list, step or *" $s $name $field -}}
        {{- else -}}
          {{- range regexFindAll "[0-9]+" (regexReplaceAll "/[0-9]+$" . "") -1 -}}
            {{- if and (not $problem) (or (lt (atoi .) (index $spec 1)) (gt (atoi .) (index $spec 2))) -}}
              {{- $problem = printf "schedule %q: %s %s is out of range %d-%d" $s $name . (index $spec 1) (index $spec 2) -}}
            {{- end -}}
          {{- end -}}
          {{- if and (not $problem) (regexMatch "/0+$" .) -}}
            {{- $problem = printf "schedule %q: %s field %q steps by 0" $s $name $field -}}
          {{- end -}}
        {{- end -}}
      {{- end -}}
    {{- end -}}
    {{- /* A floor: at most once an hour (one minute, not *, a list,
    range or step), so that a fleet does not ask SUSE's servers every
    minute. */ -}}
    {{- if and (not $problem) (not (regexMatch "^[0-9]+$" (index $fields 0))) -}}
      {{- $problem = printf "schedule %q: minute field %q fires more often than once an hour; every cluster of the fleet would ask SUSE's servers that often (the default is twice a day): use one minute, e.g. \"17 */12 * * *\"" $s (index $fields 0) -}}
    {{- end -}}
    {{- /* A date that never comes (31 February): with day-of-week *,
    day-of-month one number and month numbers, some month must have it. */ -}}
    {{- if and (not $problem) (eq (index $fields 4) "*") (regexMatch "^[0-9]+$" (index $fields 2)) (regexMatch "^[0-9]+(,[0-9]+)*$" (index $fields 3)) -}}
      {{- $days := list 0 31 29 31 30 31 30 31 31 30 31 30 31 -}}
      {{- $fires := false -}}
      {{- range splitList "," (index $fields 3) -}}
        {{- if le (atoi (index $fields 2)) (index $days (atoi .)) }}{{ $fires = true }}{{ end -}}
      {{- end -}}
      {{- if not $fires -}}
        {{- $problem = printf "schedule %q: day %s never comes in month %s, so the CronJob would never run" $s (index $fields 2) (index $fields 3) -}}
      {{- end -}}
    {{- end -}}
    {{- $problem -}}
  {{- end -}}
{{- end -}}
{{- end }}

{{/*
The schedule as a person reads it, for NOTES.txt: "every day at 00:00 and
18:00 UTC (gaps of 18 h and 6 h)" for a fixed minute and an hour field of
numbers, ranges and steps; the cron expression itself otherwise.
*/}}
{{- define "registration-engine.scheduleText" -}}
{{- $s := include "registration-engine.schedule" . -}}
{{- $f := regexSplit "\\s+" $s -1 -}}
{{- if and (eq (len $f) 5) (regexMatch "^[0-9]+$" (index $f 0)) (eq (index $f 2) "*") (eq (index $f 3) "*") (eq (index $f 4) "*") (ne (index $f 1) "*") -}}
  {{- $hours := list -}}
  {{- range splitList "," (index $f 1) -}}
    {{- $step := 1 -}}
    {{- $r := . -}}
    {{- if contains "/" . }}{{ $step = splitList "/" . | last | atoi }}{{ $r = splitList "/" . | first }}{{ end -}}
    {{- $lo := 0 }}{{ $hi := 23 -}}
    {{- if ne $r "*" -}}
      {{- $lo = splitList "-" $r | first | atoi -}}
      {{- $hi = ternary (splitList "-" $r | last | atoi) (ternary 23 $lo (contains "/" .)) (contains "-" $r) -}}
    {{- end -}}
    {{- range untilStep $lo (add $hi 1 | int) $step -}}
      {{- $hours = append $hours (printf "%02d" .) -}}
    {{- end -}}
  {{- end -}}
  {{- $hours = $hours | uniq | sortAlpha -}}
  {{- $times := list -}}
  {{- range $hours }}{{ $times = append $times (printf "%s:%02d" . (index $f 0 | atoi)) }}{{ end -}}
  {{- $gaps := list -}}
  {{- range $i, $h := $hours -}}
    {{- $next := add 24 (first $hours | atoi) -}}
    {{- if lt (add $i 1 | int) (len $hours) }}{{ $next = index $hours (add $i 1 | int) | atoi }}{{ end -}}
    {{- $gaps = append $gaps (printf "%d h" (sub $next ($h | atoi))) -}}
  {{- end -}}
  {{- $when := $times | first -}}
  {{- if gt (len $times) 1 }}{{ $when = printf "%s and %s" (initial $times | join ", ") (last $times) }}{{ end -}}
  {{- printf "every day at %s UTC" $when -}}
  {{- if gt (len $times) 1 -}}
    {{- if eq (len ($gaps | uniq)) 1 -}}
      {{- printf " (every %s)" (first $gaps) -}}
    {{- else -}}
      {{- printf " (gaps of %s and %s)" (initial $gaps | join ", ") (last $gaps) -}}
    {{- end -}}
  {{- end -}}
{{- else -}}
  {{- printf "on the cron schedule %q (UTC)" $s -}}
{{- end -}}
{{- end }}

{{/*
What is wrong with a value the engine reads, or "": empty, a REPLACE-ME
placeholder of values.yaml, or a @…@ placeholder that
manifests/marketplace/stage.sh fills in (a bundle that was not staged).
DONOTMODIFY passes: the Marketplace bundle ships it and Azure replaces it
at deployment; container-package-app renders the bundle's chart with it.
Called with (list name value what-to-set).
*/}}
{{- define "registration-engine.placeholderProblem" -}}
{{- $name := index . 0 -}}
{{- $v := toString (index . 1 | default "") -}}
{{- if not $v -}}
  {{- printf "%s is not set: %s" $name (index . 2) -}}
{{- else if contains "REPLACE-ME" $v -}}
  {{- printf "%s is still the placeholder %q: %s" $name $v (index . 2) -}}
{{- else if regexMatch "@[A-Z_]+@" $v -}}
  {{- printf "%s is still the placeholder %q: stage the bundle with manifests/marketplace/stage.sh, which fills it in" $name $v -}}
{{- end -}}
{{- end }}

{{/*
Every cross-value rule values.schema.json cannot say, checked at once so
that helm template, lint and install name every problem in one error
(templates/validate.yaml includes this). Each message names the value.
*/}}
{{- define "registration-engine.validate" -}}
{{- $problems := list -}}
{{- $azure := include "registration-engine.azure" . | fromYaml -}}
{{- $checks := list -}}

{{- /* The image: the Marketplace's, or one the cluster can pull. */ -}}
{{- $img := dig "images" "engine" dict $azure -}}
{{- if $img.image -}}
  {{- $checks = append $checks (list "global.azure.images.engine.image" $img.image "the engine's repository in the publisher's registry") -}}
  {{- range $k := list "registry" "digest" "tag" -}}
    {{- if regexMatch "@[A-Z_]+@" (toString (index $img $k | default "")) -}}
      {{- $checks = append $checks (list (printf "global.azure.images.engine.%s" $k) (index $img $k) "") -}}
    {{- end -}}
  {{- end -}}
{{- else -}}
  {{- $checks = append $checks (list "image.repository" .Values.image.repository (printf "set it to the engine's image in a registry this cluster pulls from (make release builds it; image.tag defaults to the chart's appVersion %s), or install the Azure Marketplace bundle, which sets global.azure.images.engine" .Chart.AppVersion)) -}}
{{- end -}}

{{- /* The identity the engine reads the extension's plan with. */ -}}
{{- $mode := include "registration-engine.credentialMode" . -}}
{{- if eq $mode "workload-identity" -}}
  {{- $checks = append $checks (list "azure.workloadIdentity.clientId" .Values.azure.workloadIdentity.clientId "the client ID of the managed identity or app registration federated with system:serviceaccount:<namespace>:registration-engine") -}}
  {{- $checks = append $checks (list "azure.workloadIdentity.tenantId" .Values.azure.workloadIdentity.tenantId "its Entra tenant ID") -}}
{{- end -}}

{{- /* The plan the extension must carry. */ -}}
{{- $injExt := dig "extension" "resourceId" "" $azure | toString -}}
{{- $injPlan := dig "marketplace" "planId" "" $azure | toString -}}
{{- if eq $mode "managed-identity" -}}
  {{- $checks = append $checks (list "global.azure.identity.clientId" (dig "identity" "clientId" "" $azure) "managed-identity mode reads it from Azure's injected values") -}}
  {{- /* Deployed by Azure (mainTemplate.json passed the extension's ID, or
  Azure injected its ID or plan) and still no identity: Azure injects
  global.azure.identity.clientId for the custom-meter billing model only
  (Partner Center), so the portal's default cannot work on this offer.
  container-package-app's render has none of those, and passes. */ -}}
  {{- $explicitExt := toString (.Values.azure.extensionResourceId | default "") -}}
  {{- $deployed := or (and $explicitExt (not (contains "REPLACE-ME" $explicitExt))) (and $injExt (ne $injExt "DONOTMODIFY")) (and $injPlan (ne $injPlan "DONOTMODIFY")) -}}
  {{- if and $deployed (eq (toString (dig "identity" "clientId" "" $azure)) "DONOTMODIFY") -}}
    {{- $problems = append $problems "azure.credentialMode managed-identity (the portal's default) needs the extension's managed identity, global.azure.identity.clientId, and Azure did not inject it: Azure injects it only for offers published with the custom-meter billing model, so every run would stop at load. Choose workload-identity (azure.credentialMode=workload-identity with azure.workloadIdentity.clientId and azure.workloadIdentity.tenantId; in the portal, \"Workload Identity\"), or publish the offer with the custom-meter billing model (docs/releasing.md)" -}}
  {{- end -}}
{{- end -}}
{{- $extName := ternary "global.azure.extension.resourceId" "azure.extensionResourceId" (ne (include "registration-engine.extensionResourceId" .) (toString .Values.azure.extensionResourceId)) -}}
{{- if and $injExt (ne $injExt "DONOTMODIFY") .Values.azure.extensionResourceId (not (hasPrefix "REPLACE-ME" (toString .Values.azure.extensionResourceId))) (ne (lower (trimSuffix "/" $injExt)) (lower (trimSuffix "/" (toString .Values.azure.extensionResourceId)))) -}}
  {{- $problems = append $problems (printf "global.azure.extension.resourceId %q (injected by Azure) and azure.extensionResourceId %q (passed by the bundle's mainTemplate.json) name different extensions: the engine would verify the wrong plan; they must agree" $injExt (toString .Values.azure.extensionResourceId)) -}}
{{- end -}}
{{- if and $injPlan (ne $injPlan "DONOTMODIFY") .Values.marketplace.planId (not (hasPrefix "REPLACE-ME" (toString .Values.marketplace.planId))) (ne $injPlan (toString .Values.marketplace.planId)) -}}
  {{- $problems = append $problems (printf "global.azure.marketplace.planId %q (injected by Azure) and marketplace.planId %q (passed by the bundle's mainTemplate.json) differ: the engine would refuse the extension's plan; they must agree" $injPlan (toString .Values.marketplace.planId)) -}}
{{- end -}}
{{- if regexMatch "(?i)/providers/Microsoft\\.Kubernetes/connectedClusters/" (include "registration-engine.extensionResourceId" .) -}}
  {{- $problems = append $problems (printf "%s %q: the extension of an Azure Arc cluster (Microsoft.Kubernetes/connectedClusters); the engine proves the extensions of AKS clusters only (Microsoft.ContainerService/managedClusters), whose node resource group binds the extension to the cluster, and would stop at load" $extName (include "registration-engine.extensionResourceId" .)) -}}
{{- end -}}
{{- $checks = append $checks (list $extName (include "registration-engine.extensionResourceId" .) "the ARM resource ID of the cluster extension whose Marketplace plan proves this deployment (/subscriptions/…/providers/Microsoft.KubernetesConfiguration/extensions/<name>)") -}}
{{- $checks = append $checks (list "marketplace.publisherId" .Values.marketplace.publisherId "the plan's publisher (the Marketplace bundle's mainTemplate.json passes it)") -}}
{{- $checks = append $checks (list "marketplace.offerId" .Values.marketplace.offerId "the plan's offer ID (the Marketplace bundle's mainTemplate.json passes it)") -}}
{{- $planName := ternary "global.azure.marketplace.planId" "marketplace.planId" (ne (include "registration-engine.planId" .) (toString .Values.marketplace.planId)) -}}
{{- $checks = append $checks (list $planName (include "registration-engine.planId" .) "the plan's ID (Azure injects global.azure.marketplace.planId)") -}}

{{- range $checks -}}
  {{- with include "registration-engine.placeholderProblem" . -}}
    {{- $problems = append $problems . -}}
  {{- end -}}
{{- end -}}

{{- /* What reaches the CoreDNS admission policy and a pasted command. */ -}}
{{- range (.Values.updateServerDomains | default list) -}}
  {{- with include "registration-engine.clusterDomainProblem" (toString .) -}}
    {{- $problems = append $problems . -}}
  {{- end -}}
{{- end -}}
{{- with include "registration-engine.imageProblem" . -}}
  {{- $problems = append $problems . -}}
{{- end -}}
{{- with include "registration-engine.registrationCodeProblem" . -}}
  {{- $problems = append $problems . -}}
{{- end -}}
{{- range (include "registration-engine.proxyProblems" . | fromYamlArray) -}}
  {{- $problems = append $problems . -}}
{{- end -}}
{{- /* Azure's configuration settings are a map of strings (ARM's
configurationSettings), and how its extension manager hands them to Helm
is not documented: the schema takes a whole number as digits too, and its
bounds are held here (JSON Schema's minimum applies to numbers only). */ -}}
{{- $rule := .Values.prometheusRule | default dict -}}
{{- range $v := list (list "cleanupDeadlineSeconds" .Values.cleanupDeadlineSeconds 10 3600) (list "prometheusRule.noSuccessHours" $rule.noSuccessHours 19 720) (list "prometheusRule.notRegisteredHours" $rule.notRegisteredHours 2 720) -}}
  {{- if kindIs "string" (index $v 1) -}}
    {{- $n := atoi (index $v 1) -}}
    {{- if or (lt $n (index $v 2)) (gt $n (index $v 3)) -}}
      {{- $problems = append $problems (printf "%s %q: want a whole number from %d to %d" (index $v 0) (index $v 1) (index $v 2) (index $v 3)) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- $chartEnv := include "registration-engine.chartEnv" . | fromYaml -}}
{{- range $i, $e := (.Values.extraEnv | default list) -}}
  {{- if hasKey $chartEnv (toString $e.name) -}}
    {{- $problems = append $problems (printf "extraEnv[%d] %s: the chart sets it from %s; set that instead (extraEnv would bypass its checks, or set the variable twice)" $i $e.name (index $chartEnv (toString $e.name))) -}}
  {{- end -}}
{{- end -}}
{{- with include "registration-engine.memoryLimitMiB" . -}}
  {{- if lt (atoi .) 32 -}}
    {{- $problems = append $problems (printf "resources.limits.memory %v: under 32Mi, the engine's request; the pod would be killed mid-run (default 64Mi, GOMEMLIMIT three quarters of it)" $.Values.resources.limits.memory) -}}
  {{- end -}}
{{- end -}}

{{- /* What renders and then breaks at the API server, the scheduler or
the engine's load. */ -}}
{{- if not .Values.clusterAddressRanges -}}
  {{- $problems = append $problems "clusterAddressRanges is empty or null: the CoreDNS admission policy would get no ranges to keep the engine's entries out of; list the cluster's Service, pod and node ranges (leave it out to keep the default: every private, shared and unique-local range)" -}}
{{- end -}}
{{- range $i, $r := (.Values.clusterAddressRanges | default list) -}}
  {{- with include "registration-engine.cidrProblem" (list $i $r) -}}
    {{- $problems = append $problems . -}}
  {{- end -}}
{{- end -}}
{{- $memory := dict -}}
{{- range $kind := list "requests" "limits" -}}
  {{- $v := dig $kind "memory" "" ($.Values.resources | default dict) -}}
  {{- if not (empty $v) -}}
    {{- with include "registration-engine.memoryBytes" $v -}}
      {{- $_ := set $memory $kind (float64 .) -}}
    {{- else -}}
      {{- $problems = append $problems (printf "resources.%s.memory %q: not a quantity Kubernetes reads, which refuses the pod at install; write it as 32Mi, 64Mi or 128M" $kind (include "registration-engine.durationText" $v)) -}}
    {{- end -}}
  {{- end -}}
{{- end -}}
{{- if and (hasKey $memory "requests") (hasKey $memory "limits") (gt $memory.requests $memory.limits) -}}
  {{- $problems = append $problems (printf "resources.requests.memory %v is over resources.limits.memory %v: Kubernetes refuses such a pod at install (must be less than or equal to memory limit); lower the request or raise the limit (default 32Mi and 64Mi)" .Values.resources.requests.memory .Values.resources.limits.memory) -}}
{{- end -}}
{{- $volumes := list "regionserverclnt-config" "region-server-certs" -}}
{{- if include "registration-engine.proxyCert" . }}{{ $volumes = append $volumes "proxy-ca" }}{{ end -}}
{{- range (.Values.extraVolumes | default list) }}{{ $volumes = append $volumes (toString .name) }}{{ end -}}
{{- range $i, $m := (.Values.extraVolumeMounts | default list) -}}
  {{- if not (has (toString $m.name) $volumes) -}}
    {{- $problems = append $problems (printf "extraVolumeMounts[%d] mounts %q, which no volume of the pod has: the API server refuses the CronJob at install (an atomic install rolls back); add the volume to extraVolumes, or name one of %s" $i (toString $m.name) (join ", " $volumes)) -}}
  {{- end -}}
{{- end -}}
{{- range $key := list "kubernetes.io/os" "beta.kubernetes.io/os" -}}
  {{- $os := index ($.Values.nodeSelector | default dict) $key -}}
  {{- if and $os (ne (toString $os) "linux") -}}
    {{- $problems = append $problems (printf "nodeSelector %s=%s: the engine's image runs on Linux nodes only, so its pods would stay Pending; leave it %s=linux (select nodes with another label)" $key (toString $os) $key) -}}
  {{- end -}}
{{- end -}}
{{- $plan := include "registration-engine.planId" . -}}
{{- if and (not (include "registration-engine.placeholderProblem" (list "" $plan ""))) (ne $plan "DONOTMODIFY") (not (regexMatch "^[a-z0-9][a-z0-9_-]{0,49}$" $plan)) -}}
  {{- $problems = append $problems (printf "%s %q: not a Marketplace plan ID, which Partner Center makes of lower-case letters, digits, - and _ (at most 50): the extension's plan would never match and every run would fail (exit 2); give the plan ID as Partner Center shows it, such as premium" $planName $plan) -}}
{{- end -}}

{{- /* The schedule and the time a scheduled Job takes. */ -}}
{{- with include "registration-engine.scheduleProblem" (include "registration-engine.schedule" .) -}}
  {{- $problems = append $problems . -}}
{{- end -}}
{{- /* Durations the engine, Kubernetes and the schedule can hold: a
duration in a form the engine reads, not too large for it (runDeadline
999999999999999999999 rendered a negative activeDeadlineSeconds), a run
no longer than the default schedule's shorter gap (6 h), a sleep that with
the run and the pod's start does not pass it (the next scheduled run would
then find the Lease held and be skipped). Compared exactly, fractions
included; only Kubernetes' deadlines are rounded up. */ -}}
{{- $bad := false -}}
{{- range $k := list "runDeadline" "startupSleepMax" "jobDeadline" -}}
  {{- with include "registration-engine.durationProblem" (list $k (index $.Values $k)) -}}
    {{- $problems = append $problems . -}}
    {{- $bad = true -}}
  {{- end -}}
{{- end -}}
{{- $runS := include "registration-engine.seconds" (list "runDeadline" .Values.runDeadline) -}}
{{- $run := $runS | default "0" | float64 -}}
{{- $sleep := include "registration-engine.seconds" (list "startupSleepMax" .Values.startupSleepMax) | default "0" | float64 -}}
{{- if $bad -}}
{{- else if gt $run 21600.0 -}}
  {{- $problems = append $problems (printf "runDeadline %v: longer than 6h, the default schedule's shorter gap; a run takes minutes (default 10m)" .Values.runDeadline) -}}
{{- else if not (include "registration-engine.scheduleProblem" (include "registration-engine.schedule" .)) -}}
  {{- $schedule := include "registration-engine.schedule" . -}}
  {{- with include "registration-engine.scheduleGap" $schedule -}}
    {{- if and (not $.Values.schedule) (gt (addf $sleep $run 900) (float64 .)) -}}
      {{- $problems = append $problems (printf "startupSleepMax %v + runDeadline %v + 15m for the pod to start pass 6h, the shorter gap of the default schedule (two runs a day, 18 h then 6 h apart): the next scheduled run would find the last still running and be skipped, with no error (the CronJob's concurrencyPolicy Forbid, then the Lease); keep startupSleepMax + runDeadline within 5h45m (default 1h + 10m), or set a schedule whose runs are farther apart" $.Values.startupSleepMax $.Values.runDeadline) -}}
    {{- else if gt (addf $sleep $run 900) (float64 .) -}}
      {{- $problems = append $problems (printf "startupSleepMax %v + runDeadline %v + 15m for the pod to start pass %s, the shortest gap between two runs of the schedule %q: the next scheduled run would find the last still running and be skipped, with no error (the CronJob's concurrencyPolicy Forbid, then the Lease); choose a schedule whose runs are farther apart (the default: two a day, 6 h and 18 h apart) or lower startupSleepMax" $.Values.startupSleepMax $.Values.runDeadline (include "registration-engine.human" (atoi .)) $schedule) -}}
    {{- end -}}
  {{- else -}}
    {{- $problems = append $problems (printf "schedule %q: the chart cannot tell the shortest gap between its runs, so it cannot check that startupSleepMax + runDeadline + 15m fit in it; write the hour as a number, list, range or step, the minute as one number, or use a macro (@daily) or @every <duration>" $schedule) -}}
  {{- end -}}
{{- end -}}
{{- if and $runS (not $bad) (eq $run 0.0) -}}
  {{- $problems = append $problems (printf "runDeadline %v: a run needs time; the engine refuses 0 (default 10m)" .Values.runDeadline) -}}
{{- else if and $runS (not $bad) (lt (mulf $run 1000000000) 1.0) -}}
  {{- $problems = append $problems (printf "runDeadline %v: under 1ns, which the engine reads as 0 and refuses; a run needs time (default 10m)" .Values.runDeadline) -}}
{{- else if and $runS (not $bad) (lt $run 300.0) -}}
  {{- /* A run that writes the Secret waits up to HANDOVER_TIMEOUT (3m)
  for the cluster's DNS and up to OPERATOR_WAIT (2m) for the operator,
  both within RUN_DEADLINE (job/settings.go). */ -}}
  {{- $problems = append $problems (printf "runDeadline %v: under 5m, the engine's own waits within a run (up to 3m for the cluster's DNS to serve the update server's name, HANDOVER_TIMEOUT, and 2m for rancher/scc-operator's answer, OPERATOR_WAIT): every run would hit its deadline (exit 124); leave it at the default 10m, or at least 5m" .Values.runDeadline) -}}
{{- end -}}
{{- $deadline := include "registration-engine.wholeSeconds" (list "jobDeadline" .Values.jobDeadline) -}}
{{- $needs := include "registration-engine.jobNeeds" . | atoi -}}
{{- if and $deadline (not $bad) (lt ($deadline | atoi) $needs) -}}
  {{- $problems = append $problems (printf "jobDeadline %v is shorter than a scheduled run may take, %s (15m for the pod to start + startupSleepMax %v + runDeadline %v + 2 retries of runDeadline and 1m backoff each): the Job would be killed in its sleep or its retries; raise jobDeadline (or leave it empty: the chart then derives it) or lower startupSleepMax" .Values.jobDeadline (include "registration-engine.human" $needs) .Values.startupSleepMax .Values.runDeadline) -}}
{{- end -}}

{{- if $problems -}}
  {{- $msg := printf "\n%d value(s) to fix:\n- %s" (len $problems) (join "\n- " $problems) -}}
  {{- fail $msg -}}
  {{- /* Reached only under helm lint, whose fail logs "[INFO] Fail" and
  carries on (the engine's LintMode), so that lint would pass. An include
  of a template that cannot exist is a render error lint reports, with
  the template's name in it; helm v3's engine (pkg/engine/engine.go
  cleanupExecError) cuts a render error down to what lies between its
  markers HELM_ERR_START and HELM_ERR_END, which its own fail and required
  put around their message, and prints "execution error at (<template
  position>): <message>", exactly as helm template prints a fail. So the
  name carries the list between those markers, built here from pieces:
  the error also quotes this action's source, and markers in it would be
  taken for the message's. One line, since the name is printed quoted
  (a line break would show as \n), and without double quotes for the same
  reason (they would show as \"). A helm that no longer cuts (its markers
  renamed) still fails lint, with the whole error and the list inside. */ -}}
  {{- $items := list -}}
  {{- range $i, $p := $problems }}{{ $items = append $items (printf "[%d] %s" (add $i 1) $p) }}{{ end -}}
  {{- $line := printf "%d value(s) to fix: %s" (len $problems) (join " " $items) | replace "\"" "'" -}}
  {{- include (printf "%s%s%s" (print "HELM_ERR" "_START") $line (print "HELM_ERR" "_END")) . -}}
{{- end -}}
{{- end }}
