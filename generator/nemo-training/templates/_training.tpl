{{/* Helpers of the nemo-training chart (the shared ones are in _helpers.tpl). */}}

{{/* Where the GCS FUSE mount of workload.gcsBucketForDataCataPath lands. */}}
{{- define "nemo.training.bucketMountPath" -}}/gcs{{- end -}}

{{/* Root of the experiment results: experimentRootDir, else the bucket mount, else /tmp. */}}
{{- define "nemo.training.experimentRootDir" -}}
{{- if (.Values.workload.experimentRootDir | default .Values.workload.experiment_dir) }}{{ .Values.workload.experimentRootDir | default .Values.workload.experiment_dir | trimSuffix "/" }}
{{- else if .Values.workload.gcsBucketForDataCataPath }}{{ include "nemo.training.bucketMountPath" . }}
{{- else }}/tmp{{ end -}}
{{- end -}}

{{/* volumes.gcsDownload, or the top-level gcsDownload of older charts, as JSON ({} when unset). */}}
{{- define "nemo.training.gcsDownload" -}}
{{- $d := dict -}}
{{- if and .Values.volumes .Values.volumes.gcsDownload .Values.volumes.gcsDownload.source }}{{ $d = .Values.volumes.gcsDownload }}
{{- else if and .Values.gcsDownload .Values.gcsDownload.source }}{{ $d = .Values.gcsDownload }}{{ end -}}
{{- toJson $d -}}
{{- end -}}

{{/* workload.arguments as Hydra override strings (JSON list): "key=value" strings pass through,
     {name, value} pairs become name=value (a list value becomes [a,b]; no value: the name alone, e.g. ~key). */}}
{{- define "nemo.training.arguments" -}}
{{- $out := list -}}
{{- range .Values.workload.arguments -}}
{{- if kindIs "map" . -}}
{{- if hasKey . "value" -}}
{{- $v := .value -}}
{{- if kindIs "slice" $v }}{{ $v = printf "[%s]" (join "," $v) }}{{ else if kindIs "invalid" $v }}{{ $v = "null" }}{{ end -}}
{{- $out = append $out (printf "%s=%v" .name $v) -}}
{{- else -}}
{{- $out = append $out .name -}}
{{- end -}}
{{- else -}}
{{- $out = append $out (toString .) -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Nsight Systems settings (JSON) from workload.profile and from model.nsys_profile.* overrides in
     workload.arguments (which win, as they come last on the Hydra command line):
     enabled, startStep, endStep, ranks, nodes (node indexes hosting the ranks, space-separated),
     outputDir, overrides (the model.nsys_profile.* overrides the arguments do not already set). */}}
{{- define "nemo.training.nsys" -}}
{{- $p := .Values.workload.profile | default dict -}}
{{- $gpusPerNode := include "nemo.gpusPerNode" . | int -}}
{{- $given := dict -}}
{{- range (include "nemo.training.arguments" . | fromJsonArray) -}}
{{- $kv := splitn "=" 2 . -}}
{{- $key := regexReplaceAll "^\\+{1,2}" $kv._0 "" -}}
{{- if hasPrefix "model.nsys_profile." $key -}}
{{- $_ := set $given (trimPrefix "model.nsys_profile." $key) (trim (default "" $kv._1)) -}}
{{- end -}}
{{- end -}}
{{- $enabled := $p.enabled | default false -}}
{{- if hasKey $given "enabled" -}}
{{- $enabled = has (lower (get $given "enabled")) (list "true" "1" "yes" "on") -}}
{{- end -}}
{{- $start := "10" -}}
{{- if not (kindIs "invalid" $p.startStep) }}{{ $start = toString (int $p.startStep) }}{{ end -}}
{{- if hasKey $given "start_step" }}{{ $start = get $given "start_step" }}{{ end -}}
{{- $end := "12" -}}
{{- if not (kindIs "invalid" $p.endStep) }}{{ $end = toString (int $p.endStep) }}{{ end -}}
{{- if hasKey $given "end_step" }}{{ $end = get $given "end_step" }}{{ end -}}
{{- $ranks := list -}}
{{- if hasKey $given "ranks" -}}
{{- range (get $given "ranks" | trimPrefix "[" | trimSuffix "]" | splitList ",") -}}
{{- if trim . }}{{ $ranks = append $ranks (trim . | int) }}{{ end -}}
{{- end -}}
{{- else -}}
{{- range ($p.ranks | default (list 0)) }}{{ $ranks = append $ranks (int .) }}{{ end -}}
{{- end -}}
{{- if and $enabled (regexMatch "^[0-9]+$" $start) (regexMatch "^[0-9]+$" $end) (lt (atoi $end) (atoi $start)) -}}
{{- fail (printf "Nsight profile: end step %s is before start step %s" $end $start) -}}
{{- end -}}
{{- $nodes := list -}}
{{- range $ranks }}{{ $nodes = append $nodes (div . $gpusPerNode) }}{{ end -}}
{{- $nodeWords := list -}}
{{- range ($nodes | uniq | sortAlpha) }}{{ $nodeWords = append $nodeWords (toString .) }}{{ end -}}
{{- $rankWords := list -}}
{{- range $ranks }}{{ $rankWords = append $rankWords (toString .) }}{{ end -}}
{{- $overrides := list -}}
{{- if $enabled -}}
{{- if not (hasKey $given "enabled") }}{{ $overrides = append $overrides "++model.nsys_profile.enabled=true" }}{{ end -}}
{{- if not (hasKey $given "start_step") }}{{ $overrides = append $overrides (printf "++model.nsys_profile.start_step=%s" $start) }}{{ end -}}
{{- if not (hasKey $given "end_step") }}{{ $overrides = append $overrides (printf "++model.nsys_profile.end_step=%s" $end) }}{{ end -}}
{{- if not (hasKey $given "ranks") }}{{ $overrides = append $overrides (printf "++model.nsys_profile.ranks=[%s]" (join "," $rankWords)) }}{{ end -}}
{{- end -}}
{{- $out := dict "enabled" $enabled "startStep" $start "endStep" $end "ranks" (printf "[%s]" (join "," $rankWords)) -}}
{{- $_ := set $out "nodes" (join " " $nodeWords) -}}
{{- $_ := set $out "outputDir" ($p.outputDir | default "" | trimSuffix "/") -}}
{{- $_ := set $out "trace" ($p.trace | default "cuda,nvtx") -}}
{{- $_ := set $out "extraArgs" ($p.extraArgs | default list) -}}
{{- $_ := set $out "overrides" $overrides -}}
{{- toJson $out -}}
{{- end -}}

{{/* Checks of this chart the schema cannot express. */}}
{{- define "nemo.training.validate" -}}
{{- with .Values.workload.nodes -}}
{{- if ne (int .) (include "nemo.nodes" $ | int) -}}
{{- fail (printf "workload.nodes=%d disagrees with workload.gpus=%d (%s node(s)); drop workload.nodes or fix one of them" (int .) (int $.Values.workload.gpus) (include "nemo.nodes" $)) -}}
{{- end -}}
{{- end -}}
{{- $v := .Values.volumes | default dict -}}
{{- if and $v.nfsMountPath (not $v.nfsServer) -}}
{{- fail "volumes.nfsMountPath needs volumes.nfsServer (and volumes.nfsPath)" -}}
{{- end -}}
{{- $dl := include "nemo.training.gcsDownload" . | fromJson -}}
{{- if and $dl.source (not $v.ssdMountPath) -}}
{{- fail "volumes.gcsDownload copies to the local SSD: set volumes.ssdMountPath (e.g. /ssd)" -}}
{{- end -}}
{{- if and $dl.target $v.ssdMountPath (not (hasPrefix (printf "%s/" (trimSuffix "/" $v.ssdMountPath)) (printf "%s/" (trimSuffix "/" $dl.target)))) -}}
{{- fail (printf "volumes.gcsDownload.target %s is not under volumes.ssdMountPath %s" $dl.target $v.ssdMountPath) -}}
{{- end -}}
{{- if and .Values.workload.gcsBucketForDataCataPath (not $v.gcsVolumes) -}}
{{- fail "workload.gcsBucketForDataCataPath needs volumes.gcsVolumes=true (GCS FUSE sidecar)" -}}
{{- end -}}
{{- end -}}
