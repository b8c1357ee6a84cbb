#!/usr/bin/env python3
"""helm-nemo benchmarks: each pair measured side by side (A B A B …) after a warm-up, on this machine.

Prints min/median/max per command and the median ratio per pair, writes bench/results/latest.json,
and with --check (make bench) exits 1 when a target is missed. Every target is a ratio measured in the run, so it
holds on a slower or busier machine. Pairs (issues 9 and 19):
  template   `helm-nemo template` / plain `helm template` of the same chart and values, Helm 4 and 3  <= 2.0
             (goal 1.5), with each stage's median share (HELM_NEMO_TIMINGS)
  plugin     `helm nemo template` through the plugin installed from dist/ / `helm template`         <= 2.5
  recipe     a 3-release recipe / its three plain `helm template`s one after another               <= 1.3
  scale      rendering a 4096-node JobSet / a 2-node one                                  <= 1.1
Figures that had targets in seconds (generate, check, validate, preflight, status, diagnose: issues 24, 25, 34;
report: issue 41, on the real control plane, which `make bench` builds first as `make test` does)
are each measured beside a reference that uses the same machine resources (a fresh Python, reading and parsing
the same bytes, helm's renders), alternately; the target is the median of the rounds' ratios (bench/reference.py
TARGETS: the list, the references and the limits; issue 41). The table prints both times, the ratio and its
limit, and the figure against its old target in seconds as information only.

--quick (make test runs it, tests/test_bench.py): one round of every figure, no warm-up, no targets judged: the
bench's own code paths in seconds, so a bench that no longer runs fails the suite rather than the next `make bench`.
A figure that cannot be measured (a command fails) exits 1 in every mode.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import reference  # bench/reference.py: the targets measured against a reference (issue 41)

VENV_BIN = ROOT / ".venv" / "bin"
HELM = os.environ.get("HELM4", str(ROOT / ".tools/helm4/helm"))
HELM3 = os.environ.get("HELM3", str(ROOT / ".tools/helm3/helm"))
# As a user runs it: Python may cache bytecode (some sandboxes set PYTHONDONTWRITEBYTECODE, which makes
# every run recompile the package: ~40 ms).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV = {
    **ENV,
    "GCS_BUCKET": "bench-bucket",
    "KUEUE_NAME": "bench-queue",
    "PROJECT_ID": "bench-project",
    "HELM_BIN": HELM,
}
EXAMPLE = ROOT / "values/examples/a4-llama31-405b.yaml"  # one release: the pair compares one render each
WARMUP = 2  # unmeasured rounds before the measured ones (--quick: none)


def timed(cmd: list[str], env: dict | None = None, cwd: Path = ROOT, stages: list | None = None) -> float:
    env = dict(env or ENV)
    marks = None
    if stages is not None:
        marks = Path(tempfile.mkstemp(prefix="helm-nemo-timings-")[1])
        env["HELM_NEMO_TIMINGS"] = str(marks)
    start_wall, start = time.time(), time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark command failed: {' '.join(cmd)}\n{proc.stderr.decode()}")
    if marks is not None:
        recorded, previous, durations = json.loads(marks.read_text() or "[]"), start_wall, {}
        for stage, at in recorded:
            durations[stage], previous = at - previous, at
        durations["exit"] = start_wall + elapsed - previous
        stages.append(durations)
        marks.unlink()
    return elapsed


def alternate(
    a: list[str] | list[list[str]],
    b: list[str] | list[list[str]],
    rounds: int,
    warmup: int | None = None,
    env: dict | None = None,
    stages: list | None = None,
    before_a=None,
) -> tuple[list[float], list[float]]:
    """A and B alternately; each may be one command or several run one after another. `before_a` runs
    (untimed) before each A (emptying a cache for a cold figure)."""

    def run(cmds, record=None, before=None) -> float:
        cmds = cmds if isinstance(cmds[0], list) else [cmds]
        if before is not None:
            before()
        return sum(timed(c, env, stages=record) for c in cmds)

    for _ in range(WARMUP if warmup is None else warmup):
        run(a, before=before_a), run(b)
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(run(a, stages, before_a))
        tb.append(run(b))
    return ta, tb


def stage_shares(stages: list[dict]) -> list[tuple[str, float]]:
    """Each stage's median duration (ms), in the order the stages ran."""
    names = list(dict.fromkeys(name for run in stages for name in run))
    return [(name, statistics.median(run.get(name, 0.0) for run in stages) * 1000) for name in names]


def stats(samples: list[float]) -> dict:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "n": len(samples)}


RECIPE = ROOT / "values/examples/a3ultra-405b.yaml"  # three releases


def plain_helm_inputs(tmp: Path, example: Path = EXAMPLE, helm: str = HELM) -> list[list[str]]:
    """The same charts and the same final values `helm nemo` hands to helm, as plain helm commands."""
    sys.path.insert(0, str(ROOT))
    from helm_nemo.values.plan import build_plans, helm_values_json

    commands = []
    for plan in build_plans(example, ENV):
        values = tmp / f"{example.stem}-{plan.release}.json"
        values.write_text(helm_values_json(plan))
        commands.append([helm, "template", plan.release, plan.chart, "-f", str(values)])
    return commands


def bench_template(rounds: int, tmp: Path, helm: str, name: str) -> dict:
    """Warm: the schema cache (validate/schema_cache.py) filled by the warm-up runs, as after a first run;
    cold: emptied before every run (a first run after install or after an upgrade of helm-nemo)."""
    cache = tmp / f"schema-cache-{name.replace(' ', '')}"
    env = {**ENV, "HELM_BIN": helm, "HELM_NEMO_CACHE_DIR": str(cache)}
    ours = [str(VENV_BIN / "helm-nemo"), "template", "--values", str(EXAMPLE)]
    (plain,) = plain_helm_inputs(tmp, helm=helm)
    stages: list[dict] = []
    ta, tb = alternate(ours, plain, rounds, env=env, stages=stages)
    td, te = alternate(ours, plain, rounds, env=env, before_a=lambda: shutil.rmtree(cache, ignore_errors=True))
    # The same without the offline manifest validation (--skip-manifest-validation), for the breakdown.
    tc, _ = alternate(ours + ["--skip-manifest-validation"], plain, rounds, env=env)
    return {
        "a": f"helm-nemo template ({name})",
        "b": f"helm template ({name})",
        "a_stats": stats(ta),
        "b_stats": stats(tb),
        "ratio": statistics.median(ta) / statistics.median(tb),
        "target": 2.0,
        "goal": 1.5,
        "stages_ms": stage_shares(stages),
        "cold_cache": {"stats": stats(td), "ratio": statistics.median(td) / statistics.median(te)},
        "without_validation": {"stats": stats(tc), "ratio": statistics.median(tc) / statistics.median(tb)},
    }


def bench_recipe(rounds: int, tmp: Path) -> dict:
    ours = [str(VENV_BIN / "helm-nemo"), "template", "--values", str(RECIPE)]
    ta, tb = alternate(ours, plain_helm_inputs(tmp, RECIPE), rounds)
    return {
        "a": "3-release recipe",
        "b": "3 x helm template",
        "a_stats": stats(ta),
        "b_stats": stats(tb),
        "ratio": statistics.median(ta) / statistics.median(tb),
        "target": 1.3,
    }


def bench_plugin(rounds: int, tmp: Path) -> dict | None:
    """`helm nemo template` as users type it: the plugin installed from the release tarball (make dist)."""
    dist = tmp / "dist"
    build = subprocess.run(
        [str(VENV_BIN / "python"), str(ROOT / "scripts/dist.py"), "--outdir", str(dist)], capture_output=True, text=True
    )
    if build.returncode != 0:
        return {"error": (build.stdout + build.stderr)[-500:]}
    homes = {
        name: str(tmp / "helm" / name.lower()) for name in ("HELM_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME")
    }
    env = {k: v for k, v in ENV.items() if k not in ("HELM_BIN", "HELM_PLUGINS")} | homes
    tarball = next(dist.glob("helm-nemo-*.tgz"))
    import tarfile

    folder = tmp / "helm-nemo"  # the tarball unpacked: a local .tgz file installs on Helm 4 only with a top folder
    with tarfile.open(tarball) as tar:
        tar.extractall(folder, filter="data")
    installed = subprocess.run([HELM, "plugin", "install", str(folder)], env=env, capture_output=True, text=True)
    if installed.returncode != 0:
        return {"error": installed.stderr[-500:]}
    ours = [HELM, "nemo", "template", "--values", str(EXAMPLE)]
    (plain,) = plain_helm_inputs(tmp)
    # The floor, measured beside it: what helm costs to run any plugin (a no-op one) plus what the plugin's
    # launcher costs run without helm (bin/nemo.sh as helm runs it: HELM_PLUGIN_DIR and HELM_BIN set).
    noop = tmp / "helm-noop"
    (noop / "bin").mkdir(parents=True)
    (noop / "plugin.yaml").write_text(
        'name: "noop"\nversion: "0.1.0"\nusage: "noop"\nplatformCommand:\n'
        '  - os: linux\n    command: "$HELM_PLUGIN_DIR/bin/noop.sh"\n'
    )
    (noop / "bin/noop.sh").write_text("#!/bin/sh\nexit 0\n")
    (noop / "bin/noop.sh").chmod(0o755)
    installed = subprocess.run([HELM, "plugin", "install", str(noop)], env=env, capture_output=True, text=True)
    if installed.returncode != 0:
        return {"error": installed.stderr[-500:]}
    plugins = subprocess.run([HELM, "env", "HELM_PLUGINS"], env=env, capture_output=True, text=True).stdout.strip()
    plugin_dir = Path(plugins) / folder.name
    launcher_env = {**env, "HELM_PLUGIN_DIR": str(plugin_dir), "HELM_BIN": HELM}
    launcher = ["sh", str(plugin_dir / "bin/nemo.sh"), "template", "--values", str(EXAMPLE)]
    times: dict[str, list[float]] = {"plugin": [], "plain": [], "noop": [], "launcher": []}
    commands = {
        "plugin": (ours, env),
        "plain": (plain, env),
        "noop": ([HELM, "noop"], env),
        "launcher": (launcher, launcher_env),
    }
    for round_ in range(WARMUP + rounds):
        for name, (command, command_env) in commands.items():
            elapsed = timed(command, command_env)
            if round_ >= WARMUP:
                times[name].append(elapsed)
    ta, tb = times["plugin"], times["plain"]
    median = {name: statistics.median(samples) for name, samples in times.items()}
    return {
        "a": "helm nemo template (plugin)",
        "b": "helm template",
        "a_stats": stats(ta),
        "b_stats": stats(tb),
        "ratio": median["plugin"] / median["plain"],
        "target": 2.5,
        "floor": {
            "noop_plugin": stats(times["noop"]),
            "launcher_without_helm": stats(times["launcher"]),
            "ratio": (median["noop"] + median["launcher"]) / median["plain"],
        },
        "tarball_mb": round(tarball.stat().st_size / 1e6, 1),
    }


def bench_scale(rounds: int) -> dict:
    chart = str(ROOT / "charts/a3ultra/jobset")
    base = [
        HELM,
        "template",
        "big",
        chart,
        "--set",
        "volumes.gcsMounts[0].bucketName=bench-bucket",
        "--set",
        "volumes.gcsMounts[0].mountPath=/b",
    ]
    ta, tb = alternate(base + ["--set", "workload.gpus=32768"], base + ["--set", "workload.gpus=16"], rounds)
    return {
        "a": "4096-node JobSet",
        "b": "2-node JobSet",
        "a_stats": stats(ta),
        "b_stats": stats(tb),
        "ratio": statistics.median(ta) / statistics.median(tb),
        "target": 1.1,
    }


def bench_generate(rounds: int, tmp: Path) -> dict:
    """In a copy of exactly what the wheel carries (resources.DATA_ITEMS: what generate reads in an installed
    package, CHANGELOG.md included), so the list cannot fall behind what generate needs."""
    sys.path.insert(0, str(ROOT))
    from helm_nemo.resources import DATA_ITEMS

    home = tmp / "home"
    for item in DATA_ITEMS:
        source = ROOT / item
        if source.is_dir():
            shutil.copytree(source, home / item)
        else:
            (home / item).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, home / item)
    env = {**ENV, "HELM_NEMO_HOME": str(home)}
    cli = str(VENV_BIN / "helm-nemo")
    inputs = [str(home / item) for item in DATA_ITEMS if item != "charts"]
    # The references: generate's inputs read and parsed, and a tree of charts/ written (what generate writes);
    # every file --check digests, read and hashed.
    ref_generate = ["yaml", *inputs, "--copy", str(home / "charts"), str(tmp / "charts-copy")]
    ref_check = ["tree", str(home)]
    for _ in range(WARMUP):
        timed([cli, "generate"], env), timed([cli, "generate", "--check"], env)
        reference.timed_reference(*ref_generate), reference.timed_reference(*ref_check)
    gen, check, gen_ref, check_ref = [], [], [], []
    for _ in range(rounds):
        shutil.rmtree(home / "charts")
        gen.append(timed([cli, "generate"], env))
        gen_ref.append(reference.timed_reference(*ref_generate))
        check.append(timed([cli, "generate", "--check"], env))
        check_ref.append(reference.timed_reference(*ref_check))
    return {
        "generate": {"stats": stats(gen), "samples": gen, "reference_samples": gen_ref},
        "check": {"stats": stats(check), "samples": check, "reference_samples": check_ref},
    }


def _script_figure(script: str, *args: str, codes: tuple[int, ...] | None = None) -> dict:
    """The JSON the bench script bench/`script` prints last with --json (its own process); {"error": …} when it
    printed none or exited with a code outside `codes` (None: any)."""
    proc = subprocess.run(
        [str(VENV_BIN / "python"), str(ROOT / "bench" / script), "--json", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if (codes is not None and proc.returncode not in codes) or not proc.stdout.strip():
        return {"error": (proc.stderr or proc.stdout).strip()[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_validate(rounds: int) -> dict | None:
    if not (ROOT / "bench" / "validate_bench.py").exists():
        return None
    return _script_figure("validate_bench.py", "--rounds", str(min(rounds, 5)), codes=(0,))  # cold processes


def bench_preflight(rounds: int) -> dict:
    """bench/preflight_bench.py: the emulator in its own process, A/B alternately (see its docstring)."""
    return _script_figure("preflight_bench.py", "--rounds", str(rounds), "--warmup", str(WARMUP), codes=(0, 1))


def bench_status(rounds: int) -> dict:
    return _script_figure("status_bench.py", "--rounds", str(rounds), "--warmup", str(min(WARMUP, 1)))


def bench_report(rounds: int, quick: bool) -> dict:
    """bench/report_bench.py: on the real control plane (scripts/cluster.sh's binaries, built by `make bench` as
    by `make test`), 1,024 pods; --quick: its code paths on the emulator, 16 pods and a 3 MB log."""
    size = ["--emulator-only", "--pods", "16", "--log-mb", "3"] if quick else []
    return _script_figure("report_bench.py", "--rounds", str(rounds), *size)


def bench_diagnose(rounds: int) -> dict:
    return _script_figure("diagnose_bench.py", "--rounds", str(rounds))


def judged_rows(result: dict, failed: list[str]) -> list[dict]:
    """The table's rows: every entry of reference.TARGETS that this run measured (failed figures left out)."""
    rows = []
    for entry in reference.TARGETS:
        figure = result.get(entry.key)
        if figure is None or "error" in figure or entry.key in failed:
            continue
        rows.append(reference.judge(entry, figure["samples"], figure["reference_samples"]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--quick", action="store_true", help="one round of every figure, no warm-up, no targets judged (make test)"
    )
    parser.add_argument(
        "--output", type=Path, default=ROOT / "bench" / "results" / "latest.json", help="the JSON result"
    )
    parser.add_argument(
        "--only",
        default="",
        metavar="KEY,…",
        help="run only these figures (template, template_helm3, plugin, recipe, scale, generate, validate, "
        "preflight, status, diagnose); "
        "for quick comparisons while working, never with --check",
    )
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    if only and args.check:
        parser.error("--only measures a part; --check needs every figure")
    if args.quick and args.check:
        parser.error("--quick measures one cold round; --check judges medians of several")
    if args.quick:
        global WARMUP
        WARMUP, args.rounds = 0, 1
    wanted = lambda key: not only or key in only  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ENV["HELM_NEMO_CACHE_DIR"] = str(tmp / "schema-cache")  # filled by the warm-up runs, never the user's
        result = {
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
                "helm": subprocess.run(
                    [HELM, "version", "--template", "{{.Version}}"], capture_output=True, text=True
                ).stdout,
            },
            "rounds": args.rounds,
            "template": bench_template(args.rounds, tmp, HELM, "Helm 4") if wanted("template") else None,
            "template_helm3": bench_template(args.rounds, tmp, HELM3, "Helm 3") if wanted("template_helm3") else None,
            "plugin": bench_plugin(args.rounds, tmp) if wanted("plugin") else None,
            "recipe": bench_recipe(args.rounds, tmp) if wanted("recipe") else None,
            "scale": bench_scale(args.rounds) if wanted("scale") else None,
            **(bench_generate(args.rounds, tmp) if wanted("generate") else {}),
            "validate": bench_validate(args.rounds) if wanted("validate") else None,
            "preflight": bench_preflight(args.rounds) if wanted("preflight") else None,
            "status": bench_status(args.rounds) if wanted("status") else None,
            "diagnose": bench_diagnose(args.rounds) if wanted("diagnose") else None,
            "report": bench_report(args.rounds, args.quick) if wanted("report") else None,
        }
    missed: list[str] = []  # a target missed (exit 1 with --check)
    failed: list[str] = []  # a figure not measured (exit 1 always)

    def verdict(ok: bool) -> str:
        return "(not judged: --quick)" if args.quick else "ok" if ok else "MISSED"

    print(
        f"machine: {result['machine']['cpus']} CPUs, Python {result['machine']['python']}, helm {result['machine']['helm']}, "
        f"{args.rounds} rounds"
    )
    for key in ("template", "template_helm3", "plugin", "recipe", "scale"):
        r = result[key]
        if r is None and not wanted(key):
            continue
        if r is None or "error" in r:
            print(f"{key:9} failed: {(r or {}).get('error', 'not run')}")
            failed.append(key)
            continue
        a, b = r["a_stats"], r["b_stats"]
        ok = r["ratio"] <= r["target"]
        missed += [] if ok else [key]
        print(
            f"{key:9} {r['a']:>22}: min {a['min'] * 1000:6.1f} ms  median {a['median'] * 1000:6.1f} ms  max {a['max'] * 1000:6.1f} ms"
        )
        print(
            f"{'':9} {r['b']:>22}: min {b['min'] * 1000:6.1f} ms  median {b['median'] * 1000:6.1f} ms  max {b['max'] * 1000:6.1f} ms"
        )
        print(f"{'':9} {'median ratio':>22}: {r['ratio']:.2f} (target <= {r['target']}) {verdict(ok)}")
        for stage, ms in r.get("stages_ms", []):
            share = ms / (a["median"] * 1000) * 100
            print(
                f"{'':9} {'stage ' + stage:>22}: median {ms:6.1f} ms ({share:4.1f} %)"
                if len(stage) < 17
                else f"{'':9}   stage {stage}: median {ms:6.1f} ms ({share:4.1f} %)"
            )
        if "cold_cache" in r:
            c = r["cold_cache"]
            ok_cold = c["ratio"] <= r["target"]
            missed += [] if ok_cold else [f"{key} (cold cache)"]
            print(
                f"{'':9} {'cold schema cache':>22}: median {c['stats']['median'] * 1000:6.1f} ms, ratio {c['ratio']:.2f} "
                f"{verdict(ok_cold)}"
            )
        if "floor" in r:
            f = r["floor"]
            print(
                f"{'':9} {'floor':>22}: helm running a no-op plugin {f['noop_plugin']['median'] * 1000:6.1f} ms + "
                f"bin/nemo.sh without helm {f['launcher_without_helm']['median'] * 1000:6.1f} ms: ratio {f['ratio']:.2f}"
            )
        if "without_validation" in r:
            w = r["without_validation"]
            print(
                f"{'':9} {'(no manifest check)':>22}: median {w['stats']['median'] * 1000:6.1f} ms, ratio {w['ratio']:.2f}"
            )
    for key in ("generate", "check") if wanted("generate") else ():
        s = result[key]["stats"]
        print(
            f"{key:9} {'helm-nemo ' + key:>22}: min {s['min']:.3f} s  median {s['median']:.3f} s  max {s['max']:.3f} s"
        )
    v = result["validate"]
    if not wanted("validate"):
        pass
    elif v is None:
        print("validate  not available (bench/validate_bench.py missing)")
        failed.append("validate")
    elif "error" in v:
        print(f"validate  failed: {v['error']}")
        failed.append("validate")
    else:
        print(
            f"validate  {v['documents']} documents, cold process: median {v['seconds']:.3f} s, warm {v['warm']:.3f} s"
        )
    p = result["preflight"]
    if not wanted("preflight"):
        pass
    elif p is None or "error" in p:
        print(f"preflight failed: {(p or {}).get('error', 'not run')}")
        failed.append("preflight")
    else:
        a, b = p["preflight"], p["helm_template_x3"]
        print(
            f"preflight {p['nodes']} nodes, {p['pods']} pods: min {a['min']:.3f} s  median {a['median']:.3f} s  max "
            f"{a['max']:.3f} s; its 3 helm templates alone: median {b['median']:.3f} s"
        )
    st = result["status"]
    if wanted("status"):
        if st is None or "error" in st:
            print(f"status    failed: {(st or {}).get('error', 'not run')}")
            failed.append("status")
        else:
            print(
                f"status    {st['pods']} pods, {st['log_bytes'] / 1e6:.0f} MB rank-0 log: median {st['seconds']:.3f} s "
                f"(min {st['min']:.3f}, max {st['max']:.3f})"
            )
    dg = result["diagnose"]
    if wanted("diagnose"):
        if dg is None or "error" in dg:
            print(f"diagnose  failed: {(dg or {}).get('error', 'not run')}")
            failed.append("diagnose")
        else:
            print(
                f"diagnose  {dg['log_bytes'] / 1e6:.0f} MB log: median {dg['seconds']:.3f} s (min {dg['min']:.3f}, "
                f"max {dg['max']:.3f}); healthy log: median {dg['healthy_seconds']:.3f} s"
            )
    rp = result["report"]
    if wanted("report"):
        if rp is None or "error" in rp:
            print(f"report    failed: {(rp or {}).get('error', 'not run')}")
            failed.append("report")
        else:
            cluster = "real control plane" if rp["cluster"] == "real" else "emulator"
            print(
                f"report    {rp['pods']} pods, {rp['rank0_log_bytes'] / 1e6:.0f} MB rank-0 log, {cluster}: median "
                f"{rp[rp['cluster']]['median']:.3f} s, CPU {rp[rp['cluster'] + '_cpu']['median']:.3f} s, page "
                f"{rp['html_bytes'] / 1024:.0f} KiB; status of the same run {rp[rp['cluster'] + '_status']['median']:.3f} s"
            )
    rows = judged_rows(result, failed)
    result["targets"] = rows
    if rows:
        print("\ntargets against a reference measured in the same rounds (median of the rounds' ratios; issue 41):")
        for line in reference.table(rows, judged=not args.quick):
            print(f"  {line}")
        missed += [row["key"] for row in rows if not row["ok"]]
    result["missed"], result["failed"], result["quick"] = missed, failed, args.quick
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    judged = (
        "targets not judged (--quick)"
        if args.quick
        else f"missed: {', '.join(missed)}"
        if missed
        else "all targets met"
    )
    print(f"written: {args.output}; {judged}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed or (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
