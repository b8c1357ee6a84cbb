"""Render the jobset chart for each case of cases.yaml and keep what a pod would run (run.py reads it on the GPU machine).

Runs here, where helm and helm-nemo are (`.venv/bin/python scripts/gpu_failures/render.py [CASE...]`): for each
case, the values of values.yaml plus the case's envs and gpus go through `helm-nemo template`, and the workload container
of the rendered JobSet (command, args, env, terminationGracePeriodSeconds) and the launcher and config files of
its ConfigMaps are written to rendered/<case>.json. The GPU machine has no helm; what it runs is exactly this.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def case_values(base: dict, case: dict) -> dict:
    values = json.loads(json.dumps(base))
    release = values["releases"][0]["values"]
    release["workload"]["gpus"] = case.get("gpus", 16)
    envs = case.get("envs", {})  # a case's value replaces values.yaml's (MAX_STEPS), the others are added
    kept = [e for e in release["workload"]["envs"] if e["name"] not in envs]
    release["workload"]["envs"] = kept + [{"name": k, "value": str(v)} for k, v in envs.items()]
    return values


def pod_of(manifests: str) -> dict:
    docs = [d for d in yaml.safe_load_all(manifests) if d]
    config_maps = {d["metadata"]["name"]: d.get("data", {}) for d in docs if d["kind"] == "ConfigMap"}
    jobset = next(d for d in docs if d["kind"] == "JobSet")
    job = jobset["spec"]["replicatedJobs"][0]
    pod = job["template"]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "workload")
    files = {}
    for volume in pod.get("volumes", []):
        name = (volume.get("configMap") or {}).get("name")
        mount = next((m for m in container.get("volumeMounts", []) if m["name"] == volume["name"]), None)
        if name in config_maps and mount:
            for key, text in config_maps[name].items():
                files[f"{mount['mountPath']}/{key}"] = text
    return {
        "jobset": jobset["metadata"]["name"],
        "replicated_job": job["name"],
        "parallelism": job["template"]["spec"].get("parallelism", 1),
        "chart": jobset["metadata"].get("labels", {}).get("helm.sh/chart"),
        "command": container.get("command", []),
        "args": container.get("args", []),
        "env": container.get("env", []),
        "files": files,
        "terminationGracePeriodSeconds": pod.get("terminationGracePeriodSeconds", 30),
    }


def main() -> None:
    cases = yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]
    base = yaml.safe_load((HERE / "values.yaml").read_text())
    out = HERE / "rendered"
    out.mkdir(exist_ok=True)
    helm_nemo = ROOT / ".venv/bin/helm-nemo"
    wanted = sys.argv[1:] or list(cases)  # the cases named, else all
    for name, case in ((n, cases[n]) for n in wanted):
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copy(HERE / "launcher.sh", Path(tmp) / "launcher.sh")
            values = Path(tmp) / "values.yaml"
            values.write_text(yaml.safe_dump(case_values(base, case), sort_keys=False))
            proc = subprocess.run(
                [str(helm_nemo), "template", "--values", str(values)], capture_output=True, text=True, check=False
            )
        if proc.returncode != 0:
            sys.exit(f"{name}: helm-nemo template failed:\n{proc.stderr}")
        (out / f"{name}.json").write_text(json.dumps(pod_of(proc.stdout), indent=1, sort_keys=True) + "\n")
        print(f"rendered {name}")


if __name__ == "__main__":
    main()
