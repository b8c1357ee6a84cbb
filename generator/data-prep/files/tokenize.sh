#!/bin/bash
# helm-nemo data-prep: tokenize one shard (docs/data-prep.md). prepare.sh calls it as
#   tokenize.sh INPUT.jsonl OUTPUT_PREFIX
# and it writes OUTPUT_PREFIX_<key>_document.bin and .idx for every key of DATA_PREP_JSON_KEYS (default: text).
#
# With DATA_PREP_TOKENIZE_COMMAND=N (the values' tokenizer.command, N words): runs the words
# DATA_PREP_TOKENIZE_COMMAND_0 .. _<N-1> with INPUT.jsonl and OUTPUT_PREFIX appended.
# Otherwise NeMo's preprocess_data_for_megatron.py (DATA_PREP_PREPROCESS, run with DATA_PREP_PYTHON, python3) with
#   --tokenizer-library DATA_PREP_TOKENIZER_LIBRARY (megatron), --tokenizer-type DATA_PREP_TOKENIZER_TYPE,
#   --vocab-file DATA_PREP_TOKENIZER_VOCAB_FILE, --merge-file DATA_PREP_TOKENIZER_MERGE_FILE,
#   --tokenizer-model DATA_PREP_TOKENIZER_MODEL (each when set), --dataset-impl mmap,
#   --workers DATA_PREP_TOKENIZER_WORKERS (1), --append-eod unless DATA_PREP_TOKENIZER_APPEND_EOD=false,
#   --json-keys, then DATA_PREP_TOKENIZER_ARGS=N extra arguments DATA_PREP_TOKENIZER_ARG_0 .. _<N-1>.
# Values arrive as environment only (one variable per word), never as script text.
set -euo pipefail

if (($# != 2)); then
  echo "usage: tokenize.sh INPUT.jsonl OUTPUT_PREFIX" >&2
  exit 2
fi

# words PREFIX COUNT: the variables PREFIX_0 .. PREFIX_<COUNT-1>, into the array `items`
words() {
  local prefix=$1 count=$2 i name
  items=()
  if [[ ! $count =~ ^[0-9]{1,4}$ ]]; then
    echo "tokenize.sh: $prefix must be a count, not '$count'" >&2
    exit 2
  fi
  for ((i = 0; i < count; i++)); do
    name=${prefix}_$i
    if [[ -z ${!name+set} ]]; then
      echo "tokenize.sh: $name is not set" >&2
      exit 2
    fi
    items+=("${!name}")
  done
}

if [[ -n ${DATA_PREP_TOKENIZE_COMMAND:-} ]]; then
  words DATA_PREP_TOKENIZE_COMMAND "$DATA_PREP_TOKENIZE_COMMAND"
  if ((${#items[@]} == 0)); then
    echo "tokenize.sh: DATA_PREP_TOKENIZE_COMMAND names no command" >&2
    exit 2
  fi
  exec "${items[@]}" "$1" "$2"
fi

read -r -a keys <<<"${DATA_PREP_JSON_KEYS:-text}"
args=(
  --input "$1"
  --output-prefix "$2"
  --json-keys "${keys[@]}"
  --tokenizer-library "${DATA_PREP_TOKENIZER_LIBRARY:-megatron}"
)
if [[ -n ${DATA_PREP_TOKENIZER_TYPE:-} ]]; then args+=(--tokenizer-type "$DATA_PREP_TOKENIZER_TYPE"); fi
if [[ -n ${DATA_PREP_TOKENIZER_VOCAB_FILE:-} ]]; then args+=(--vocab-file "$DATA_PREP_TOKENIZER_VOCAB_FILE"); fi
if [[ -n ${DATA_PREP_TOKENIZER_MERGE_FILE:-} ]]; then args+=(--merge-file "$DATA_PREP_TOKENIZER_MERGE_FILE"); fi
if [[ -n ${DATA_PREP_TOKENIZER_MODEL:-} ]]; then args+=(--tokenizer-model "$DATA_PREP_TOKENIZER_MODEL"); fi
args+=(--dataset-impl mmap --workers "${DATA_PREP_TOKENIZER_WORKERS:-1}")
if [[ ${DATA_PREP_TOKENIZER_APPEND_EOD:-true} != false ]]; then args+=(--append-eod); fi
words DATA_PREP_TOKENIZER_ARG "${DATA_PREP_TOKENIZER_ARGS:-0}"
args+=(${items[@]+"${items[@]}"})

exec "${DATA_PREP_PYTHON:-python3}" \
  "${DATA_PREP_PREPROCESS:-/opt/NeMo/scripts/nlp_language_modeling/preprocess_data_for_megatron.py}" "${args[@]}"
