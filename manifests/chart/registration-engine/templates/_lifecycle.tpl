{{/*
What a release does on its own over its life (docs/install.md,
docs/upgrade.md, docs/uninstall.md): a run after an install or an upgrade that
changes what a run reads, a schedule spread over the day per install, and
a cleanup at uninstall.
*/}}

{{/*
The existing CronJob of this release, or an empty dict: at install, and
wherever lookup answers nothing (helm template, --dry-run, the Azure
Marketplace's offline validation).
*/}}
{{- define "registration-engine.existingCronJob" -}}
{{- toYaml (lookup "batch/v1" "CronJob" .Release.Namespace (include "registration-engine.name" .) | default dict) -}}
{{- end }}

{{/*
runInputs: a hash of everything a run reads that the release renders: the
Job spec (image, credentials mode, extension, plan, every variable), the
region servers' configuration and certificates, and the registration code.
The run Job is named by it, and the CronJob records it
(registration-engine.cattle.io/run-inputs), so that an upgrade that changes
none of these starts nothing.
*/}}
{{- define "registration-engine.runInputs" -}}
{{- $in := list (include "registration-engine.jobSpec" (dict "root" .)) (include (print .Template.BasePath "/configmaps.yaml") .) (include (print .Template.BasePath "/secret.yaml") .) -}}
{{- $in | toJson | sha256sum | trunc 10 -}}
{{- end }}

{{/*
runNeeded: "true" when this render has the run Job: when the existing
CronJob records other runInputs than these (always at install, and
wherever lookup answers nothing), or when the Job of these inputs still
exists (an upgrade that changes nothing a run reads renders it again,
unchanged, so Helm neither starts nor deletes it; its TTL takes it). Off
with runOnChange false.
*/}}
{{- define "registration-engine.runNeeded" -}}
{{- $cj := include "registration-engine.existingCronJob" . | fromYaml -}}
{{- $was := dig "metadata" "annotations" "registration-engine.cattle.io/run-inputs" "" $cj -}}
{{- $hash := include "registration-engine.runInputs" . -}}
{{- $job := lookup "batch/v1" "Job" .Release.Namespace (printf "%s-run-%s" (include "registration-engine.name" .) $hash) -}}
{{- if and (eq (toString .Values.runOnChange) "true") (or (ne $was $hash) $job) }}true{{ end -}}
{{- end }}

{{/*
scheduleOffset: the minute of the day (0..1439) of this install's first
scheduled run. Chosen once: the existing CronJob's
registration-engine.cattle.io/schedule-offset when it has one, so every
upgrade keeps it; otherwise a hash of the release's namespace and name, the
Marketplace extension's resource ID (unique per cluster, and present even
where lookup answers nothing) and kube-system's UID (unique per cluster,
when lookup answers).
*/}}
{{- define "registration-engine.scheduleOffset" -}}
{{- $cj := include "registration-engine.existingCronJob" . | fromYaml -}}
{{- $kept := dig "metadata" "annotations" "registration-engine.cattle.io/schedule-offset" "" $cj | toString -}}
{{- if and (regexMatch "^[0-9]{1,4}$" $kept) (lt (atoi $kept) 1440) -}}
{{- atoi $kept -}}
{{- else -}}
{{- $ks := lookup "v1" "Namespace" "" "kube-system" | default dict -}}
{{- $seed := printf "%s/%s/%s/%s" .Release.Namespace .Release.Name (include "registration-engine.extensionResourceId" .) (dig "metadata" "uid" "" $ks) -}}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 -}}
{{- $n := 0 -}}
{{- range $c := splitList "" (sha256sum $seed | trunc 6) -}}
{{- $n = add (mul $n 16) (get $hex $c) -}}
{{- end -}}
{{- mod $n 1440 -}}
{{- end -}}
{{- end }}

{{/*
schedule: the user's schedule when set; otherwise the shape of the
design card's schedule (00:00 and 18:00: two runs a day, 18 h then 6 h
apart) moved by scheduleOffset: minute M, hours H and H+18 (mod 24). Over a fleet the
offsets spread the runs over the whole day instead of the hour after 00:00
and 18:00 UTC.
*/}}
{{- define "registration-engine.schedule" -}}
{{- if .Values.schedule -}}
{{- .Values.schedule -}}
{{- else -}}
{{- $o := int (include "registration-engine.scheduleOffset" .) -}}
{{- $m := mod $o 60 -}}
{{- $h1 := div $o 60 -}}
{{- $h2 := mod (add $h1 18) 24 -}}
{{- if lt $h2 $h1 -}}
{{- printf "%d %d,%d * * *" $m $h2 $h1 -}}
{{- else -}}
{{- printf "%d %d,%d * * *" $m $h1 $h2 -}}
{{- end -}}
{{- end -}}
{{- end }}
