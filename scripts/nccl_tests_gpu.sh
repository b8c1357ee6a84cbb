#!/bin/bash
# Record nccl-tests outputs on a machine with 2 GPUs (tests/fixtures/nccl/gpu/):
#   bash scripts/nccl_tests_gpu.sh SRC OUT
# SRC: NVIDIA/nccl-tests at the pinned tag v2.19.6 (a0b82b2260cf5152b9f8c061bbf7eaf0ba096432), e.g.
#   git -C nccl-tests archive --prefix=nccl-tests/ v2.19.6 | tar -x
# NCCL's headers and library come from the torch wheel's nvidia-nccl package. Each run writes OUT/<name>.log (the
# test's stdout and stderr) and its exit code to OUT/<name>.rc; OUT/versions.info says what ran.
set -uo pipefail
src=${1:?usage: nccl_tests_gpu.sh SRC OUT}
out=${2:?usage: nccl_tests_gpu.sh SRC OUT}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nccl_pkg=$(python3 -c 'import nvidia.nccl as n; print(list(n.__path__)[0])')
home=/tmp/nccl-home
mkdir -p $home/lib
ln -sfn "$nccl_pkg/include" $home/include
ln -sf "$nccl_pkg"/lib/libnccl.so.2 $home/lib/libnccl.so.2
ln -sf "$nccl_pkg"/lib/libnccl.so.2 $home/lib/libnccl.so
export LD_LIBRARY_PATH=$home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
cuda=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
make -C "$src/src" -j16 NCCL_HOME=$home CUDA_HOME="$cuda" MPI=0 \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bin=$src/build
{
  echo "nccl-tests: v2.19.6 a0b82b2260cf5152b9f8c061bbf7eaf0ba096432"
  echo "nccl: $(python3 -c 'import torch; print(".".join(map(str, torch.cuda.nccl.version())))') ($nccl_pkg)"
  echo "torch: $(python3 -c 'import torch; print(torch.__version__)')"
  echo "nvcc: $(nvcc --version | tail -1)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvidia-smi topo -m
} >"$out/versions.info" 2>&1
record() {  # NAME ENV... -- COMMAND...
  local name=$1; shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "+ ${envs[*]} $*" >"$out/$name.cmd"
  env "${envs[@]}" "$@" >"$out/$name.log" 2>&1
  echo $? >"$out/$name.rc"
  echo "$name: exit $(cat "$out/$name.rc"), $(grep -m1 'Avg bus bandwidth' "$out/$name.log")"
}
info=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
record all_reduce_nvlink_info "${info[@]}" -- "$bin/all_reduce_perf" -b 8 -e 2G -f 2 -g 2
record all_gather_nvlink_info "${info[@]}" -- "$bin/all_gather_perf" -b 8 -e 2G -f 2 -g 2
record all_reduce_ring_nvlink NCCL_ALGO=Ring -- "$bin/all_reduce_perf" -b 1M -e 1G -f 2 -g 2
record all_reduce_nvlink_plain NCCL_DEBUG=WARN -- "$bin/all_reduce_perf" -b 8 -e 256M -f 4 -g 2
record all_gather_threads_nvlink NCCL_DEBUG=WARN -- "$bin/all_gather_perf" -b 1M -e 512M -f 2 -t 2 -g 1
sock=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
record all_reduce_socket_info "${sock[@]}" "${info[@]}" -- "$bin/all_reduce_perf" -b 8 -e 2G -f 4 -g 2 -n 5 -w 2
record all_gather_socket_info "${sock[@]}" "${info[@]}" -- "$bin/all_gather_perf" -b 8 -e 1G -f 4 -g 2 -n 5 -w 2
