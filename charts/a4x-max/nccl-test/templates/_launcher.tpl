{{/* The launcher the pods run (JSON {text, replaced}): workload_launcher as given, except a published launcher
     listed in files/published-launchers.yaml (recognised by the sha256 of its text), which the chart's own
     launcher replaces (replaced: that entry); without workload_launcher, the chart's own. */}}
{{- define "nemo.ncclLauncher" -}}
{{- $own := .Files.Get "files/nccl-test.sh" -}}
{{- $given := .Values.workload_launcher | default "" -}}
{{- $replaced := dict -}}
{{- if $given -}}
{{- $digest := sha256sum $given -}}
{{- range (.Files.Get "files/published-launchers.yaml" | fromYamlArray) -}}
{{- if eq .sha256 $digest -}}{{- $replaced = . -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- dict "text" (ternary $given $own (and (ne $given "") (empty $replaced))) "replaced" $replaced | toJson -}}
{{- end -}}
