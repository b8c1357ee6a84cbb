#!/bin/bash
# Make the GPU part of the diagnosis corpus (tests/logs/real/gpu/) on a machine with 2 GPUs, torch and Lightning:
#   bash scripts/gpu_failures.sh OUT WHEELS [CASE...]
# WHEELS: a folder with the nemo_toolkit wheel (NeMo's ProgressPrinter is taken from it) and, where the machine's
# Python has no `lightning` package, lightning's wheel; megatron-core's wheel for the cases that use Megatron-core. The pod commands are rendered beforehand, where helm is:
#   .venv/bin/python scripts/gpu_failures/render.py        (writes scripts/gpu_failures/rendered/)
# then the outputs are copied into the corpus with scripts/gpu_failures/collect.py. Cases: scripts/gpu_failures/cases.yaml.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:?usage: gpu_failures.sh OUT WHEELS [CASE...]}
wheels=${2:?usage: gpu_failures.sh OUT WHEELS [CASE...]}
shift 2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! python3 -c 'import lightning' 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-failures-site "$wheels"/lightning-*.whl
  export PYTHONPATH=/tmp/gpu-failures-site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! python3 -c 'import megatron.core' 2>/dev/null && compgen -G "$wheels/megatron_core-*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-failures-site "$wheels"/megatron_core-*.whl
  export PYTHONPATH=/tmp/gpu-failures-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PATH=$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH
exec python3 "$here/gpu_failures/run.py" "$out" "$wheels" "$@"
