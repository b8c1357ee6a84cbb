#!/usr/bin/env bash
# Run every layout of one set (layouts | smoke) on this machine's GPUs, one torchrun per layout, and write
#   $OUTDIR/megatron_h200.jsonl  one JSON record per rank per layout (measure.py merge)
#   $OUTDIR/measure.log          every layout's torchrun output, in order
# One-GPU layouts run two at a time (GPU 0 and GPU 1, separate processes: their peaks do not mix);
# two-GPU layouts run alone. Each layout is bounded by PER_LAYOUT_TIMEOUT seconds.
# Usage: scripts/fit_measure/run_all.sh OUTDIR [layouts|smoke|moe] [NAME ...]
# ONE_GPU=1: a machine with one GPU (one-GPU layouts one after another; two-GPU layouts cannot run there).
set -u
OUTDIR=${1:?usage: run_all.sh OUTDIR [layouts|smoke] [NAME ...]}
SET=${2:-layouts}
shift 2 2>/dev/null || shift $#
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
PER_LAYOUT_TIMEOUT=${PER_LAYOUT_TIMEOUT:-150}
# NVLink multicast stays off (the device machine's rule); keep these even if a caller's environment differs.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4 CUDA_DEVICE_MAX_CONNECTIONS=1
mkdir -p "$OUTDIR"
WORK=$(mktemp -d)
JSONL="$OUTDIR/megatron_h200.jsonl"
LOG="$OUTDIR/measure.log"
: >"$JSONL"
: >"$LOG"

{ echo "# $(date -u +%FT%TZ) set=$SET host=$(hostname)"; nvidia-smi --query-gpu=index,name,memory.total,driver_version \
  --format=csv,noheader; "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'; } >>"$LOG" 2>&1

run_one() { # name gpus port devices
  local name=$1 gpus=$2 port=$3 devs=$4 rc
  local t0=$SECONDS
  CUDA_VISIBLE_DEVICES=$devs timeout -k 10 "$PER_LAYOUT_TIMEOUT" \
    "$PY" -m torch.distributed.run --nproc-per-node "$gpus" --master-port "$port" \
    "$HERE/measure.py" run --layout "$name" --outdir "$WORK" >"$WORK/$name.log" 2>&1
  rc=$?
  echo "# exit code $rc after $((SECONDS - t0)) s" >>"$WORK/$name.log"
  echo "$rc" >"$WORK/$name.rc"
}

finish() { # name
  local name=$1
  { echo "===== $name (exit $(cat "$WORK/$name.rc"))"; cat "$WORK/$name.log"; } >>"$LOG"
  "$PY" "$HERE/measure.py" merge --layout "$name" --rc "$(cat "$WORK/$name.rc")" --outdir "$WORK" --out "$JSONL"
}

mapfile -t ALL < <("$PY" "$HERE/measure.py" list --set "$SET")
port=29500
one=()
two=()
for line in "${ALL[@]}"; do
  name=${line% *}
  gpus=${line##* }
  if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  if [ "$gpus" = 1 ]; then one+=("$name"); else two+=("$name"); fi
done

# One-GPU layouts in pairs (one at a time on a one-GPU machine: ONE_GPU=1).
i=0
while [ $i -lt ${#one[@]} ]; do
  a=${one[$i]}
  b=${one[$((i + 1))]:-}
  if [ "${ONE_GPU:-0}" = 1 ]; then b=; i=$((i - 1)); fi
  pa=$port pb=$((port + 1))
  port=$((port + 2))
  run_one "$a" 1 "$pa" 0 &
  [ -n "$b" ] && run_one "$b" 1 "$pb" 1 &
  wait
  finish "$a"
  [ -n "$b" ] && finish "$b"
  i=$((i + 2))
done
for name in "${two[@]}"; do
  run_one "$name" 2 "$port" 0,1
  port=$((port + 1))
  finish "$name"
done
echo "# done $(date -u +%FT%TZ)" >>"$LOG"
rm -rf "$WORK"
