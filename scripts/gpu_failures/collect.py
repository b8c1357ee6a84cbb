"""Copy what scripts/gpu_failures.sh wrote on the GPU machine into the corpus: tests/logs/real/gpu/<case>/.

    .venv/bin/python scripts/gpu_failures/collect.py OUT [OUT...]   (later folders win for a case run twice)

Each case gets its pods' logs as the run wrote them (node-<i>.log), its flight-recorder dumps, and case.yaml: the
provenance (the script, the chart version the pod command came from, the versions the GPU machine reported), each
pod's exit code as the kubelet would report it, what the stand-in for JobSet did and when, and the truth of
cases.yaml. For a case whose truth names no rank (every rank fails alike), the truth's file is the pod whose
log shows the truth's line first by the kubelet's time.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent.parent / "tests/logs/real/gpu"
NEMO_WHEEL = "nemo_toolkit 2.7.3 (ProgressPrinter, nemo/lightning/pytorch/callbacks/progress_printer.py)"


def first_file(case_dir: Path, line: str) -> str:
    hits = []
    for log in sorted(case_dir.glob("node-*.log")):
        for text in log.read_text(errors="replace").splitlines():
            if line in text:
                hits.append((text.split(" ", 1)[0], log.name))
                break
    return min(hits)[1]


def main() -> None:
    cases = yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]
    for out in map(Path, sys.argv[1:]):
        versions = json.loads((out / "versions.json").read_text())
        for result_file in sorted(out.glob("*/result.json")):
            source = result_file.parent
            name = source.name
            result = json.loads(result_file.read_text())
            if "skipped" in result:  # the machine could not make it (no memory cgroup): nothing to collect
                print(f"{name}: skipped: {result['skipped']}")
                continue
            rendered = json.loads((HERE / "rendered" / f"{name}.json").read_text())
            target = CORPUS / name
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for item in sorted(source.iterdir()):
                if item.name != "result.json":
                    shutil.copy(item, target / item.name)
            case = cases[name]
            truth = dict(case["truth"])
            if truth["class"] != "healthy":
                if "rank" in truth:
                    truth["file"] = f"node-{truth['rank']}.log"
                else:
                    truth["file"] = first_file(target, truth["line"])
                if truth["line"] not in (target / truth["file"]).read_text(errors="replace"):
                    sys.exit(f"{name}: the truth's line is not in {truth['file']}")
            doc = {
                "origin": "gpu",
                "source": f"scripts/gpu_failures.sh OUT WHEELS {name}",
                "chart": rendered["chart"],
                "versions": {
                    "torch": versions["torch"],
                    "cuda": versions["cuda"],
                    "nccl": versions.get("nccl"),
                    "lightning": versions["lightning"],
                    "nemo": NEMO_WHEEL,
                    "gpus": versions["gpus"],
                    "driver": versions["driver"][0] if versions["driver"] else None,
                    **{k: versions[k] for k in ("megatron_core", "transformers", "huggingface_hub") if k in versions},
                },
                "case": {k: v for k, v in case.items() if k != "truth"},
                "truth": truth,
                "exit_codes": result["exit_codes"],
                "jobset": result["events"],
                "seconds": result["seconds"],
            }
            if "prepare" in result:  # what ran before the pods (the earlier attempt that left a checkpoint, ...)
                doc["prepare"] = result["prepare"]
            (target / "case.yaml").write_text(yaml.safe_dump(doc, sort_keys=False, width=120))
            print(f"{name}: {truth['class']} {truth.get('file', '')}")


if __name__ == "__main__":
    main()
