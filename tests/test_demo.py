"""`make demo` stays true: the demo script installs the plugin and renders the seed 001 recipe."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_script_renders_the_seed_001_recipe():
    env = {k: v for k, v in os.environ.items() if k not in ("GCS_BUCKET", "KUEUE_NAME", "PROJECT_ID", "HELM_BIN")}
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts/demo.sh")], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "JobSet/llama31-405b (namespace ml-team): 54 pods x 8 GPUs, queue a3-ultra" in proc.stdout
    assert "16 object(s)" in proc.stdout
    assert "$.workload.gpus: 430 is not valid here" in proc.stderr and "exit code: 2" in proc.stdout
