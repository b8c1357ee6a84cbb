#!/bin/bash
# helm-nemo's NCCL test launcher (A4): every pod runs sshd on port 222; rank 0
# waits until every pod answers, runs <benchmark>_perf from /third_party/nccl-tests/build on all GPUs with mpirun
# (any number of GPUs per node), then prints the bus bandwidth per message size and tells the other pods to exit.
# Its exit status is nccl-tests' (a failed or wrong run fails the pod).
#   --benchmark all_gather|all_reduce|alltoall|broadcast|reduce|reduce_scatter|sendrecv  (all_gather)
#   --mask M (0x0)  --begin_msg_size 1K  --end_msg_size 16G  --factor 2  --warmup_iters 50  --run_iters 100
# all_reduce runs with NCCL_ALGO=Ring unless the env names an algorithm: on 2 nodes NCCL's Tree/NVLSTree would
# report a bus bandwidth above what the network carries (the profile's all_reduce floors are Ring figures).
# NCCL logs at INFO at least, for INIT, ENV and NET, so the log names the transport (`NCCL INFO Using network ...`)
# and the environment NCCL read. It also serves gpu-recipes' src/launchers/nccl-test.sh, which the chart
# recognises and replaces (files/published-launchers.yaml): the same arguments, log folder and log file name.
set -eu -o pipefail

benchmark=all_gather mask=0x0 begin=1K end=16G factor=2 warmup=50 iters=100
while [ $# -gt 0 ]; do
  case $1 in
    --benchmark) benchmark=$2 ;;
    --mask) mask=$2 ;;
    --begin_msg_size) begin=$2 ;;
    --end_msg_size) end=$2 ;;
    --factor) factor=$2 ;;
    --warmup_iters) warmup=$2 ;;
    --run_iters) iters=$2 ;;
    # gpu-recipes' launcher reads it; here the chart's GPUS_PER_NODE decides, so a value is checked, not used.
    --gpus_per_node) [ "$2" = "$GPUS_PER_NODE" ] || { echo "nccl-test: --gpus_per_node $2 but the pods have $GPUS_PER_NODE GPUs" >&2; exit 2; } ;;
    *) echo "nccl-test: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
case $benchmark in *[!a-z_]* | "") echo "nccl-test: bad benchmark $benchmark" >&2; exit 2 ;; esac

case ${NCCL_DEBUG:-} in INFO | TRACE) ;; *) export NCCL_DEBUG=INFO ;; esac
export NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,ENV,NET}
if [ "$benchmark" = all_reduce ] && [ -z "${NCCL_ALGO:-}" ]; then export NCCL_ALGO=Ring; fi
export NCCL_TESTS_SPLIT_MASK=$mask

port=222
done_flag=/tmp/nccl-test.done
service ssh restart
# The NCCL plugin's libraries first on the library path and in the linker cache of every pod, one directory at a
# time (ldconfig cannot stat a colon-joined list), as gpu-recipes' launcher does before any rank starts.
if [ -n "${NCCL_PLUGIN_PATH:-}" ]; then
  export LD_LIBRARY_PATH="${NCCL_PLUGIN_PATH}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  ldconfig ${NCCL_PLUGIN_PATH//:/ } 2>/dev/null || true
fi

if [ "${JOB_COMPLETION_INDEX:-0}" != 0 ]; then
  until [ -e "$done_flag" ]; do sleep 5; done
  exit 0
fi

hosts=()
for ((i = 0; i < NNODES; i++)); do hosts+=("${HOSTNAME_PREFIX}${i}.${DOMAIN_NAME}"); done
ssh_opts=(-p "$port" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes)
for host in "${hosts[@]}"; do
  until ssh "${ssh_opts[@]}" "$host" true; do echo "waiting for $host"; sleep 5; done
done
# One line per pod: slots = the GPUs each pod has (any number, not only 1 or 8).
: > /tmp/hostfile-gpus
: > /tmp/hostfile-pods
for host in "${hosts[@]}"; do
  echo "$host slots=$GPUS_PER_NODE" >> /tmp/hostfile-gpus
  echo "$host slots=1" >> /tmp/hostfile-pods
done

# Ranks on other pods start from sshd, not from this pod's environment: pass the network stack's env on.
forward=(-x PATH -x LD_LIBRARY_PATH)
for var in $(compgen -e); do
  case $var in NCCL_* | FI_* | GLOO_* | OMPI_MCA_* | CUDA_* | LD_PRELOAD) forward+=(-x "$var") ;; esac
done

mkdir -p "${LOG_DIR:=/tmp/nccl-tests-results}"
# gpu-recipes' log file name: <benchmark>_<nodes>_<GPUs per node>_<begin>_<end>_<factor>_<warmup>_<iters>_<start time>.log
log="$LOG_DIR/${benchmark}_${NNODES}_${GPUS_PER_NODE}_${begin}_${end}_${factor}_${warmup}_${iters}_$(date +%Y-%m-%d-%H-%M-%S).log"
status=0
OMPI_MCA_orte_keep_fqdn_hostnames=t mpirun --allow-run-as-root --bind-to none \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca plm_rsh_no_tree_spawn true \
  --mca plm_rsh_args "${ssh_opts[*]}" \
  -np $((NNODES * GPUS_PER_NODE)) --hostfile /tmp/hostfile-gpus "${forward[@]}" \
  bash -c "[ -f /usr/local/gib/scripts/set_nccl_env.sh ] && source /usr/local/gib/scripts/set_nccl_env.sh; \
    exec /third_party/nccl-tests/build/${benchmark}_perf -b $begin -e $end -f $factor -w $warmup -n $iters" \
  2>&1 | tee "$log" || status=$?

# nccl-tests rows: size count type redop root time algbw busbw #wrong (out of place), time algbw busbw #wrong (in place).
awk '$1 ~ /^[0-9]+$/ && NF >= 12 { printf "nccl-test: size=%s busbw=%s busbw_inplace=%s\n", $1, $8, $12 }
     /Avg bus bandwidth/ { printf "nccl-test: avg_busbw=%s\n", $(NF - ($NF ~ /^(OK|FAILED)$/)) }' "$log"
echo "nccl-test: exit status $status; judge the log with: helm nemo preflight --nccl-log FILE --accelerator a4 --nodes $NNODES"

OMPI_MCA_orte_keep_fqdn_hostnames=t mpirun --allow-run-as-root --mca plm_rsh_no_tree_spawn true \
  --mca plm_rsh_args "${ssh_opts[*]}" \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 -np "${#hosts[@]}" --hostfile /tmp/hostfile-pods \
  touch "$done_flag" || true
exit "$status"
