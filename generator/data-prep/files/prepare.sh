#!/bin/bash
# helm-nemo data-prep worker (docs/data-prep.md): downloads, extracts and tokenizes this worker's share of
# the shard list into Megatron .bin/.idx files. Shipped in the data-prep chart's ConfigMap and run as is by
# the Slurm array job. Needs bash, coreutils, curl, zstd and gzip only.
#
# Environment:
#   DATA_PREP_INDEX, DATA_PREP_WORKERS   this worker (0-based) of how many; worker i takes shards k % workers == i
#   DATA_PREP_SHARDS      file: name<TAB>source<TAB>sha256-or-empty per line, in shard order
#   DATA_PREP_DOWNLOADS   file: path<TAB>url<TAB>sha256-or-empty per line (optional)
#   DATA_PREP_OUTPUT      output folder; DATA_PREP_JSON_KEYS: space-separated keys (default: text)
#   DATA_PREP_TOKENIZE    executable, called as "$DATA_PREP_TOKENIZE" INPUT.jsonl OUTPUT_PREFIX; writes
#                         OUTPUT_PREFIX_<key>_document.bin and .idx for every key
#   DATA_PREP_RETRIES (5), DATA_PREP_RETRY_DELAY (10 s), DATA_PREP_KEEP_DOWNLOADS (false)
#
# Per shard: skipped when <output>/.helm-nemo/<name>.done lists its outputs with their sizes and they match;
# else download (to <name>.<ext>.part, renamed when whole; a .part left by an interrupted attempt or run is
# continued with a range request) or read a path in place, check the sha256 when given, extract, tokenize
# into the work folder, move the outputs into <output>, write the marker last.
# A failed shard does not stop the others; the exit status is 1 when any shard failed.
set -euo pipefail

say() { printf 'helm-nemo data-prep: %s\n' "$*"; }
refuse() {
  printf 'helm-nemo data-prep: error: %s\n' "$*" >&2
  exit 2
}

index=${DATA_PREP_INDEX:-}
workers=${DATA_PREP_WORKERS:-}
shards_file=${DATA_PREP_SHARDS:-}
downloads_file=${DATA_PREP_DOWNLOADS:-}
output=${DATA_PREP_OUTPUT:-}
read -r -a keys <<<"${DATA_PREP_JSON_KEYS:-text}"
tokenize=${DATA_PREP_TOKENIZE:-}
retries=${DATA_PREP_RETRIES:-5}
delay=${DATA_PREP_RETRY_DELAY:-10}
keep=${DATA_PREP_KEEP_DOWNLOADS:-false}

[[ $workers =~ ^[1-9][0-9]{0,5}$ ]] || refuse "DATA_PREP_WORKERS must be a number of workers (1 or more), not '$workers'"
[[ $index =~ ^(0|[1-9][0-9]{0,5})$ ]] && ((index < workers)) ||
  refuse "DATA_PREP_INDEX must be 0..$((workers - 1)), not '$index'"
[[ $retries =~ ^[0-9]{1,4}$ ]] || refuse "DATA_PREP_RETRIES must be a count, not '$retries'"
[[ $delay =~ ^[0-9]{1,6}$ ]] || refuse "DATA_PREP_RETRY_DELAY must be seconds, not '$delay'"
[[ $keep == true || $keep == false ]] || refuse "DATA_PREP_KEEP_DOWNLOADS must be true or false, not '$keep'"
[[ -n $shards_file && -r $shards_file ]] || refuse "DATA_PREP_SHARDS names no readable file ('$shards_file')"
[[ -z $downloads_file || -r $downloads_file ]] || refuse "DATA_PREP_DOWNLOADS names no readable file ('$downloads_file')"
[[ $output == /* ]] || refuse "DATA_PREP_OUTPUT must be an absolute path, not '$output'"
[[ -n $tokenize && -x $tokenize ]] || refuse "DATA_PREP_TOKENIZE names no executable ('$tokenize')"
((${#keys[@]} > 0)) || refuse "DATA_PREP_JSON_KEYS names no key"
for key in "${keys[@]}"; do
  [[ $key =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || refuse "JSON key '$key' cannot be part of a file name"
done

output=${output%/}
output=${output:-/}
marks=$output/.helm-nemo
work=$marks/work
mkdir -p -- "$work"

# 1234567 -> "1.1 MiB"
human_size() {
  local bytes=$1 unit=0 scale=1
  local -a units=(B KiB MiB GiB TiB PiB)
  if ((bytes < 1024)); then
    printf '%d B' "$bytes"
    return
  fi
  while ((unit < 5 && bytes >= scale * 1024)); do
    scale=$((scale * 1024))
    unit=$((unit + 1))
  done
  local tenths=$((bytes * 10 / scale))
  printf '%d.%d %s' $((tenths / 10)) $((tenths % 10)) "${units[unit]}"
}

# 190 -> "3m10s"
human_time() {
  local s=$1
  if ((s >= 3600)); then
    printf '%dh%dm%ds' $((s / 3600)) $((s % 3600 / 60)) $((s % 60))
  elif ((s >= 60)); then
    printf '%dm%ds' $((s / 60)) $((s % 60))
  else
    printf '%ds' "$s"
  fi
}

sha256_of() {
  local sum
  sum=$(sha256sum -- "$1")
  printf '%s' "${sum%% *}"
}

# validator_of HEADERS: the strong ETag, else the Last-Modified, of the last response in a curl --dump-header
# file when it was a 200; nothing when it has neither (a resumed download then trusts the file is unchanged).
validator_of() {
  local line name value status='' etag='' modified=''
  [[ -f $1 ]] || return 0
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%$'\r'}
    if [[ $line == HTTP/* ]]; then
      read -r _ status _ <<<"$line"
      etag='' modified=''
    elif [[ $line == *:* ]]; then
      name=${line%%:*} value=${line#*:}
      value=${value#"${value%%[![:space:]]*}"}
      case ${name,,} in
        etag) etag=$value ;;
        last-modified) modified=$value ;;
      esac
    fi
  done <"$1"
  [[ $status == 200 ]] || return 0
  if [[ -n $etag && $etag != W/* ]]; then
    printf '%s' "$etag"
  else
    printf '%s' "$modified"
  fi
}

# fetch URL FILE WHAT: FILE is written only by curl; retried on connection errors, timeouts, HTTP 408, 429
# and 5xx (DATA_PREP_RETRIES times, DATA_PREP_RETRY_DELAY seconds apart). A non-empty FILE (left by a failed
# attempt of this run or by an earlier run) is continued with a range request (curl --continue-at -), sent
# with If-Range: the validator of the response that began FILE (FILE.headers), so that a file changed on
# the server comes whole. When the server sends the whole file anyway (curl exit 33: curl appends nothing)
# or answers 416, FILE starts again from zero without counting an attempt; after a 33, the next attempts of
# this fetch do not ask for a range. Prints the reason of a failure. FILE.headers is removed on success;
# on failure FILE and FILE.headers are the caller's to keep (to resume) or remove.
fetch() {
  local url=$1 file=$2 what=$3 attempt=0 resume=true code rc reason offset validator
  local -a args
  while :; do
    attempt=$((attempt + 1))
    offset=0
    if [[ $resume == true && -s $file ]]; then
      offset=$(stat -c %s -- "$file")
    else
      rm -f -- "$file" "$file.headers"
    fi
    if ((offset > 0)); then
      say "$what: resuming at $(human_size "$offset")" >&2
      args=(--continue-at -)
      validator=$(validator_of "$file.headers")
      [[ -z $validator ]] || args+=(--header "If-Range: $validator")
    else
      args=(--dump-header "$file.headers")
    fi
    rc=0
    code=$(curl --globoff --silent --show-error --fail --location "${args[@]}" --output "$file" \
      --write-out '%{http_code}' --connect-timeout 30 --speed-limit 1024 --speed-time 120 -- "$url" \
      2>"$file.err") || rc=$?
    if ((rc == 0)) && [[ $code == 2?? ]]; then
      rm -f -- "$file.err" "$file.headers"
      return 0
    fi
    if ((rc != 0 && rc != 22)); then
      reason="curl exit $rc: $(head -c 300 -- "$file.err" | tr '\n' ' ')"
    else
      reason="HTTP $code"
    fi
    rm -f -- "$file.err"
    if ((offset > 0)) && { ((rc == 33)) || [[ $code == 416 ]]; }; then
      ((rc != 33)) || resume=false
      say "$what: the server did not continue at $(human_size "$offset") (${reason% }), restarting from zero" >&2
      rm -f -- "$file" "$file.headers"
      attempt=$((attempt - 1))
      continue
    fi
    if ((rc == 0 || rc == 22)) && [[ ! $code =~ ^(408|429|5[0-9][0-9])$ ]]; then
      printf '%s' "$reason"
      return 1
    fi
    if ((attempt > retries)); then
      printf '%s after %d attempts' "$reason" "$attempt"
      return 1
    fi
    say "$what: attempt $attempt of $((retries + 1)) failed ($reason), retrying in ${delay}s" >&2
    sleep "$delay"
  done
}

# complete NAME: the marker exists, names every output of every key, and each listed file has its size.
complete() {
  local name=$1 marker=$marks/$1.done size file key suffix found
  [[ -f $marker ]] || return 1
  local -A listed=()
  while IFS=$'\t' read -r size file; do
    [[ -n $file ]] || continue
    [[ $size =~ ^[0-9]+$ && $file != */* && -f $output/$file ]] || return 1
    [[ $(stat -c %s -- "$output/$file") == "$size" ]] || return 1
    listed[$file]=1
  done <"$marker"
  for key in "${keys[@]}"; do
    for suffix in bin idx; do
      found=${listed[${name}_${key}_document.$suffix]:-}
      [[ -n $found ]] || return 1
    done
  done
}

# shard_failed REASON: ends the shard's subshell (status 3: the reason is said)
shard_failed() {
  say "shard $name failed: $*"
  exit 3
}

# prepare NAME SOURCE SHA256: run in a subshell (set -e applies); prints the shard's done/failed line.
prepare() {
  local name=$1 source=$2 expected=${3,,} started=$SECONDS
  local base ext download input got reason key suffix file bytes=0
  rm -f -- "$marks/$name.done"
  base=${source%%[?#]*}
  case $base in
    *.zst) ext=jsonl.zst ;;
    *.gz) ext=jsonl.gz ;;
    *) ext=jsonl ;;
  esac
  if [[ $source == http://* || $source == https://* ]]; then
    download=$work/$name.$ext
    if [[ ! -f $download ]]; then # a whole download left by an earlier failed attempt is used again
      if ! reason=$(fetch "$source" "$download.part" "shard $name download"); then
        if [[ -s $download.part ]]; then # kept: the next run (the Job's next pod) continues it
          reason+=" ($(human_size "$(stat -c %s -- "$download.part")") kept to resume)"
        else
          rm -f -- "$download.part" "$download.part.headers"
        fi
        shard_failed "download: $reason"
      fi
      mv -f -- "$download.part" "$download"
    fi
  else
    [[ -f $source ]] || shard_failed "no file $source"
    download=$source
  fi
  if [[ -n $expected ]]; then
    got=$(sha256_of "$download")
    if [[ $got != "$expected" ]]; then
      [[ $download == "$source" ]] || rm -f -- "$download"
      shard_failed "sha256 mismatch (expected ${expected:0:12}..., got ${got:0:12}...)"
    fi
  fi
  input=$work/$name.jsonl
  case $ext in
    jsonl.zst) zstd -d -q -f -o "$input.part" -- "$download" || shard_failed "zstd -d failed" ;;
    jsonl.gz) gzip -d -c -- "$download" >"$input.part" || shard_failed "gzip -d failed" ;;
  esac
  if [[ $ext != jsonl ]]; then
    mv -f -- "$input.part" "$input"
  elif [[ $download == "$source" ]]; then
    input=$source
  else
    input=$download
  fi
  for key in "${keys[@]}"; do
    rm -f -- "$work/${name}_${key}_document.bin" "$work/${name}_${key}_document.idx"
  done
  local status=0
  "$tokenize" "$input" "$work/$name" </dev/null || status=$?
  if ((status != 0)); then
    for key in "${keys[@]}"; do
      rm -f -- "$work/${name}_${key}_document.bin" "$work/${name}_${key}_document.idx"
    done
    [[ $input == "$source" || $input == "$download" ]] || rm -f -- "$input"
    shard_failed "tokenizer exited with status $status"
  fi
  for key in "${keys[@]}"; do
    for suffix in bin idx; do
      file=${name}_${key}_document.$suffix
      [[ -f $work/$file ]] || shard_failed "the tokenizer wrote no $file"
    done
  done
  : >"$marks/$name.done.part"
  for key in "${keys[@]}"; do
    for suffix in bin idx; do
      file=${name}_${key}_document.$suffix
      mv -f -- "$work/$file" "$output/$file"
      size=$(stat -c %s -- "$output/$file")
      bytes=$((bytes + size))
      printf '%s\t%s\n' "$size" "$file" >>"$marks/$name.done.part"
    done
  done
  mv -f -- "$marks/$name.done.part" "$marks/$name.done"
  if [[ $keep != true ]]; then
    [[ $input == "$source" ]] || rm -f -- "$input"
    [[ $download == "$source" ]] || rm -f -- "$download"
  fi
  say "shard $name done ($(human_size "$bytes") in $(human_time $((SECONDS - started))))"
}

# Extra downloads (tokenizer files) first, in every worker: each to a .part file of its own, renamed into place.
if [[ -n $downloads_file ]]; then
  mapfile -t lines <"$downloads_file"
  for line in "${lines[@]}"; do
    [[ -n $line ]] || continue
    IFS=$'\t' read -r path url expected <<<"$line"
    expected=${expected,,}
    [[ $path == /* && ($url == http://* || $url == https://*) ]] ||
      refuse "bad line in $downloads_file: '$line' (path<TAB>url<TAB>sha256)"
    if [[ -f $path ]] && { [[ -z $expected ]] || [[ $(sha256_of "$path") == "$expected" ]]; }; then
      say "download $path kept (present)"
      continue
    fi
    mkdir -p -- "$(dirname -- "$path")"
    part=$path.$index.part
    if ! reason=$(fetch "$url" "$part" "download $path"); then
      rm -f -- "$part" "$part.headers"
      say "download $path failed: $reason"
      exit 1
    fi
    if [[ -n $expected ]]; then
      got=$(sha256_of "$part")
      if [[ $got != "$expected" ]]; then
        rm -f -- "$part"
        say "download $path failed: sha256 mismatch (expected ${expected:0:12}..., got ${got:0:12}...)"
        exit 1
      fi
    fi
    mv -f -- "$part" "$path"
    say "download $path done ($(human_size "$(stat -c %s -- "$path")"))"
  done
fi

# This worker's shards: line k (blank lines aside) when k % workers == index.
mapfile -t lines <"$shards_file"
names=() sources=() sums=()
k=0
for line in "${lines[@]}"; do
  [[ -n $line ]] || continue
  if ((k % workers == index)); then
    IFS=$'\t' read -r name source expected <<<"$line"
    names+=("$name") sources+=("$source") sums+=("$expected")
  fi
  k=$((k + 1))
done

say "worker $index/$workers shards ${#names[@]}"
skipped=0 failed=0
for i in "${!names[@]}"; do
  name=${names[i]}
  if [[ ! $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]]; then
    say "shard $name failed: not a file name"
    failed=$((failed + 1))
    continue
  fi
  if complete "$name"; then
    say "shard $name skipped (complete)"
    skipped=$((skipped + 1))
    continue
  fi
  # A subshell of its own, outside any condition (where bash would ignore set -e): any failing command ends
  # this shard only.
  set +e
  (
    set -e
    prepare "$name" "${sources[i]}" "${sums[i]}"
  )
  status=$?
  set -e
  if ((status != 0)); then
    ((status == 3)) || say "shard $name failed: exit status $status"
    failed=$((failed + 1))
  fi
done

summary="worker $index/$workers finished: ${#names[@]} shards, $skipped skipped"
((failed == 0)) || summary+=", $failed failed"
say "$summary"
((failed == 0)) || exit 1
