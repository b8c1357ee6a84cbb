#!/bin/bash
# Example launcher (helm-nemo): NeMo 2 pretraining with one of NeMo's built-in recipes.
# The chart runs it as `bash /workload/launcher/launch-workload.sh <defaultArguments> <arguments>` in every
# pod; NNODES, GPUS_PER_NODE, JOB_COMPLETION_INDEX, MASTER_ADDR and MASTER_PORT come from the chart.
set -euo pipefail
RECIPE="${NEMO_RECIPE:?set NEMO_RECIPE in workload.envs, e.g. llama31_405b}"
echo "node ${JOB_COMPLETION_INDEX}/${NNODES}: ${GPUS_PER_NODE} GPUs, rendezvous ${MASTER_ADDR}:${MASTER_PORT}"
exec torchrun \
  --nnodes="${NNODES}" \
  --nproc-per-node="${GPUS_PER_NODE}" \
  --node-rank="${JOB_COMPLETION_INDEX}" \
  --master-addr="${MASTER_ADDR}" \
  --master-port="${MASTER_PORT}" \
  -m nemo.collections.llm.api pretrain --factory "${RECIPE}" \
  trainer.num_nodes="${NNODES}" trainer.devices="${GPUS_PER_NODE}" "$@"
