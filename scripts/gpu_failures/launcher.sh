#!/bin/bash
# The values' files.workload_launcher for scripts/gpu_failures.sh: starts torchrun on the small model of train.py,
# as a recipe's launcher starts NeMo. The chart runs it as `bash /workload/launcher/launch-workload.sh <args>` in
# every pod; NNODES, GPUS_PER_NODE, JOB_COMPLETION_INDEX, MASTER_ADDR and MASTER_PORT come from the chart.
# RDZV_BACKEND: static (torchrun's default with --node-rank) or c10d (dynamic, RDZV_JOIN_TIMEOUT s to join);
# TORCHRUN_TEE: torchrun's --tee (3: every rank's lines prefixed [default<N>]:); LAUNCHER_SOCKET_IFNAME: the
# user's own NCCL_SOCKET_IFNAME, set here after the chart's (a launcher that picks its own interface).
set -euo pipefail
echo "node ${JOB_COMPLETION_INDEX}/${NNODES}: ${GPUS_PER_NODE} GPUs, rendezvous ${MASTER_ADDR}:${MASTER_PORT}"
if [[ -n ${LAUNCHER_SOCKET_IFNAME:-} ]]; then
  export NCCL_SOCKET_IFNAME=${LAUNCHER_SOCKET_IFNAME}
fi
rendezvous=(--node-rank="${JOB_COMPLETION_INDEX}" --master-addr="${MASTER_ADDR}" --master-port="${MASTER_PORT}")
if [[ -n ${RDZV_CONF:-} ]]; then
  rendezvous+=(--rdzv-conf="${RDZV_CONF}")
fi
if [[ ${RDZV_BACKEND:-static} == c10d ]]; then
  rendezvous=(--rdzv-backend=c10d --rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}" --rdzv-id="${JOBSET_NAME}"
    --rdzv-conf="join_timeout=${RDZV_JOIN_TIMEOUT:-30}")
fi
tee=()
if [[ -n ${TORCHRUN_TEE:-} ]]; then
  tee=(--tee "${TORCHRUN_TEE}")
fi
exec torchrun --nnodes="${NNODES}" --nproc-per-node="${GPUS_PER_NODE}" "${rendezvous[@]}" "${tee[@]}" \
  "${TRAIN_SCRIPT:-/opt/gpu-failures/train.py}" "$@"
