#!/bin/bash
# helm-nemo's NCCL test launcher (A3 Ultra): every pod runs sshd on port 222; rank 0
# waits until every pod answers, runs <benchmark>_perf from /third_party/nccl-tests/build on all GPUs with mpirun,
# then prints the bus bandwidth per message size and tells the other pods to exit.
#   --benchmark all_gather|all_reduce|alltoall|broadcast|reduce|reduce_scatter|sendrecv  (all_gather)
#   --mask M (0x0)  --begin_msg_size 1K  --end_msg_size 16G  --factor 2  --warmup_iters 50  --run_iters 100
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
    *) echo "nccl-test: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
case $benchmark in *[!a-z_]* | "") echo "nccl-test: bad benchmark $benchmark" >&2; exit 2 ;; esac

port=222
done_flag=/tmp/nccl-test.done
service ssh restart

if [ "${JOB_COMPLETION_INDEX:-0}" != 0 ]; then
  until [ -e "$done_flag" ]; do sleep 5; done
  exit 0
fi

hosts=()
for ((i = 0; i < NNODES; i++)); do hosts+=("${HOSTNAME_PREFIX}${i}.${DOMAIN_NAME}"); done
for host in "${hosts[@]}"; do
  until ssh -p "$port" -o StrictHostKeyChecking=no "$host" true; do echo "waiting for $host"; sleep 5; done
done
: > /tmp/hostfile-gpus
: > /tmp/hostfile-pods
for host in "${hosts[@]}"; do
  echo "$host port=$port slots=$GPUS_PER_NODE" >> /tmp/hostfile-gpus
  echo "$host port=$port slots=1" >> /tmp/hostfile-pods
done

mkdir -p "${LOG_DIR:=/tmp/nccl-tests-results}"
log="$LOG_DIR/${benchmark}_${NNODES}x${GPUS_PER_NODE}_${begin}_${end}_${JOB_IDENTIFIER}.log"
status=0
OMPI_MCA_orte_keep_fqdn_hostnames=t mpirun --allow-run-as-root --bind-to none \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 --mca plm_rsh_no_tree_spawn true \
  -np $((NNODES * GPUS_PER_NODE)) --hostfile /tmp/hostfile-gpus \
  -x PATH -x LD_LIBRARY_PATH -x NCCL_DEBUG -x NCCL_TESTS_SPLIT_MASK="$mask" \
  bash -c "[ -f /usr/local/gib/scripts/set_nccl_env.sh ] && source /usr/local/gib/scripts/set_nccl_env.sh; \
    exec /third_party/nccl-tests/build/${benchmark}_perf -b $begin -e $end -f $factor -w $warmup -n $iters" \
  2>&1 | tee "$log" || status=$?

# nccl-tests rows: size count type redop root time algbw busbw #wrong (out of place), time algbw busbw #wrong (in place).
awk '$1 ~ /^[0-9]+$/ && NF >= 12 { printf "nccl-test: size=%s busbw=%s busbw_inplace=%s\n", $1, $8, $12 }
     /Avg bus bandwidth/ { printf "nccl-test: avg_busbw=%s\n", $NF }' "$log"

OMPI_MCA_orte_keep_fqdn_hostnames=t mpirun --allow-run-as-root --mca plm_rsh_no_tree_spawn true \
  --mca btl tcp,self --mca btl_tcp_if_include eth0 -np "${#hosts[@]}" --hostfile /tmp/hostfile-pods \
  touch "$done_flag" || true
exit "$status"
