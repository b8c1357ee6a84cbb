"""The corpus harness (scripts/corpus.py) offline: its committed subset of gpu-recipes README commands
(tests/fixtures/corpus/, one per accelerator x chart kind x values dialect), rendered with our charts on
Helm 3 and Helm 4 and compared with the recipe charts' renders exactly as on the full corpus; the
allowed-differences list's shape; and the harness's own pieces (README reading, normalisation, baseline).
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from conftest import render_fixture

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "corpus"


def _corpus():
    if "corpus" not in sys.modules:
        spec = importlib.util.spec_from_file_location("corpus", ROOT / "scripts" / "corpus.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["corpus"] = module
        spec.loader.exec_module(module)
    return sys.modules["corpus"]


corpus = _corpus()
ENTRIES = corpus.load_allowed()
CASES = sorted(p.parent.name for p in FIXTURES.glob("*/command.txt"))


def source(case: str) -> dict[str, str]:
    lines = (FIXTURES / case / "source.txt").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if ": " in line)


@pytest.mark.parametrize("case", CASES)
def test_corpus_case(helm, case):
    src = source(case)
    chart = ROOT / src["project_chart"]
    release = (FIXTURES / case / "command.txt").read_text().split("\n", 1)[0]
    kind = src["selector"].split("/")[1]
    ours = render_fixture(helm, FIXTURES / case, chart)
    anchor = (FIXTURES / case / "anchor-normalized.yaml").read_text()
    unexplained, _ = corpus.compare_texts(anchor, ours, release, kind, src["selector"], ENTRIES)
    expected_file = FIXTURES / case / "expected-differences.txt"
    expected = expected_file.read_text().splitlines() if expected_file.exists() else []
    got = [str(d) for d in unexplained]
    assert got == expected, f"{case} ({helm.name}): differences no allowed entry explains:\n" + "\n".join(
        f"  {d}" for d in got
    )


def test_the_subset_covers_every_accelerator_kind_and_dialect():
    selectors = {source(case)["selector"] for case in CASES}
    accelerators_kinds = {"/".join(s.split("/")[:2]) for s in selectors}
    assert {
        "a3mega/jobset",
        "a3mega/nemo-training",
        "a3ultra/jobset",
        "a4/jobset",
        "a4x/jobset",
        "a4x-max/jobset",
        "g4/jobset",
        "-/supervisor",
        "-/gcs-fuse",
    } <= accelerators_kinds
    # Every src chart a README uses and every recipe chart copy but two (7628f5e reads the recipe's own
    # files with .Files.Get, whose content the fixture would copy; 7284dd4/81b5c5d/c8b2a60 differ as
    # f6c9c43 does, which is here): docs/compatibility.md lists them.
    copies = {s.rsplit(":", 1)[1] for s in selectors if ":" in s}
    assert copies >= {
        "e70871c",
        "54efbb6",
        "6fa23a2",
        "ae59e45",
        "b4ffa21",
        "baa2c1e",
        "0d24797",
        "1db0c17",
        "2362c6e",
        "3f01744",
        "6204cd2",
        "743e1f7",
        "e2b6d54",
        "ecc077b",
        "0a7cec0",
        "239a488",
        "449ca11",
        "6e301e7",
        "82a33b8",
        "8e2583a",
        "9f311db",
        "f6c9c43",
        "f44cba3",
    }
    dialects = {case: (FIXTURES / case / "command.txt").read_text() for case in CASES}
    values = {case: "".join(p.read_text() for p in (FIXTURES / case).glob("values*.yaml")) for case in CASES}
    assert any("runScript:" in v for v in values.values())  # workload.runScript
    assert any(re.search(r"^  nodeSelector:", v, re.M) for v in values.values())  # workload.nodeSelector
    assert any(re.search(r"^nodeSelector:", v, re.M) for v in values.values())  # top-level nodeSelector
    assert any("gcsDownload" in v for v in values.values())
    assert any("enable_local_ckpt: true" in v for v in values.values())
    assert any("workload.hfToken" in c for c in dialects.values())
    assert any("workload.arguments" in c for c in dialects.values())
    assert "Apache License, Version 2.0" in (FIXTURES / "NOTICE").read_text()


def test_allowed_entries_are_well_formed():
    for entry in ENTRIES:
        assert set(entry) <= {"id", "where", "path", "change", "value", "to", "was", "reason", "evidence"}, entry["id"]
        assert entry.get("was") in (None, "number", "boolean"), entry["id"]
        assert entry["change"] in ("added", "removed", "changed", "any"), entry["id"]
        assert entry.get("reason") and entry.get("where"), entry["id"]
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", entry["id"]), entry["id"]
        re.compile(entry["path"])
        for key in ("value", "to"):
            if key in entry:
                re.compile(entry[key])
        assert "to" not in entry or entry["change"] == "changed", entry["id"]


def test_every_entry_says_what_reads_the_field_or_why_that_is_not_shown():
    """`evidence`: {reads, source} (what reads the field and what changes at runtime, with a repository path or
    a URL), or {gap} (why that is not shown); only the first kind counts in the strict figures (--evidence-only)."""
    backed = []
    for entry in ENTRIES:
        evidence = entry.get("evidence")
        assert isinstance(evidence, dict) and set(evidence) in ({"reads", "source"}, {"gap"}), entry["id"]
        if "gap" in evidence:
            assert len(evidence["gap"]) > 40 and not corpus.evidence_backed(entry), entry["id"]
            continue
        assert len(evidence["reads"]) > 40, entry["id"]
        assert re.search(r"https://|[\w.-]+/[\w./-]+\.(go|py|sh|j2|yaml|md|cc)\b|@v?[0-9a-f.]+", evidence["source"]), (
            entry["id"]
        )
        assert corpus.evidence_backed(entry)
        backed.append(entry["id"])
    assert {"labels-added", "no-own-headless-service", "nccl-launcher-replaced", "gcsfuse-sidecar-uncapped"} <= set(
        backed
    )


def test_quote_removal_makes_plain_exports_equal_and_keeps_the_rest():
    script = (
        'export A="eth0"  \n  export B="$X"\nexport C="a b"\nexport D="/usr/local/gib/scripts/nccl.conf"\nexport E="*"'
    )
    assert corpus._unquote_plain_exports(script).split("\n") == [
        "export A=eth0  ",
        '  export B="$X"',  # expanded inside the quotes only
        'export C="a b"',  # split without them
        "export D=/usr/local/gib/scripts/nccl.conf",
        'export E="*"',  # globbed without them
    ]


# --- the harness's pieces -------------------------------------------------------------------------------


def test_readme_commands_are_read_as_a_shell_would(tmp_path):
    recipe = tmp_path / "training" / "a4x" / "m" / "recipe"
    recipe.mkdir(parents=True)
    (recipe / "values.yaml").write_text("workload: {gpus: 4}\n")
    (recipe / "README.md").write_text(
        "Intro\n\n```bash\nexport WORKLOAD_NAME=$USER-a4x-m\nexport RECIPE_ROOT=$REPO_ROOT/nowhere\ncd $RECIPE_ROOT\n"
        'helm install $WORKLOAD_NAME . -f values.yaml \\\n  --set workload.arguments[0]="a b ${NNODES}" \\\n'
        "  --set queue=${KUEUE_NAME}\n```\n\n    ```bash\n    helm  install -f values.yaml x_y .\n    ```\n"
    )
    first, second = corpus.discover(tmp_path)
    assert first.id == "training/a4x/m/recipe/README.md#1" and first.cwd == recipe.resolve()
    assert first.release == "user-a4x-m" and first.chart_arg == "."
    assert corpus.command_args(first) == [
        "-f",
        "values.yaml",
        "--set",
        "workload.arguments[0]=a b ",
        "--set",
        "queue=test-queue",
    ]
    assert second.release == "x-y" and "invalid for helm" in second.note and second.literal  # per README
    assert corpus.map_chart(tmp_path, first).reason == "not a local chart: ."  # the recipe has no Chart.yaml


def test_normalisation_masks_the_run_and_reads_launcher_words():
    script_anchor = (
        'echo "Launching workload with the following arguments:"\necho "  a"\necho ""\nsleep 10\n'
        "bash /workload/launcher/launch-workload.sh \\\n--x=${NNODES} \\\nb c \\\n\n"
    )
    script_ours = (
        'LAUNCHER_ARGS=()\nset -f\necho "Launching workload with the following arguments:"\n'
        'echo ""\nsleep 10\nbash /workload/launcher/launch-workload.sh "${LAUNCHER_ARGS[@]}"\n'
    )

    def jobset(name, script, env, args=None):
        container = {"name": "workload", "env": env, "command": ["bash", "-c", script]}
        if args is not None:
            container["args"] = args
        return {
            "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "workload",
                        "template": {"spec": {"template": {"spec": {"hostIPC": False, "containers": [container]}}}},
                    }
                ]
            },
        }

    anchor = corpus.normalize_render(
        [
            jobset(
                "r-ab1z",
                script_anchor,
                [
                    {"name": "JOB_IDENTIFIER", "value": "r-ab1z"},
                    {"name": "MASTER_ADDR", "value": "r-ab1z-workload-0-0.r-ab1z"},
                ],
            )
        ],
        "r",
    )
    ours = corpus.normalize_render(
        [
            jobset(
                "r",
                script_ours,
                [
                    {"name": "JOB_IDENTIFIER", "value": "r-2026-01-01-00-00-00"},
                    {"name": "MASTER_ADDR", "value": "r-workload-0-0.r"},
                ],
                args=["workload", "--x=${NNODES} b", "c"],
            )
        ],
        "r",
    )
    from helm_nemo.diff.semantic import semantic_diff

    assert semantic_diff(anchor, ours) == []
    pod = ours[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "hostIPC" not in pod and pod["containers"][0]["launcherWords"] == ["--x=${NNODES}", "b", "c"]
    assert pod["containers"][0]["env"][0]["value"] == "r-RUN"


def test_regressions_against_the_baseline(tmp_path):
    baseline = tmp_path / "baseline.txt"
    cmd = corpus.Command("training/x/README.md", 1, 1, tmp_path, [])
    corpus.write_baseline(baseline, [corpus.Result(cmd, "parity")], "abc")
    assert corpus.read_baseline(baseline) == {"training/x/README.md#1": "parity"}


def test_figures_count_recipes_by_their_first_and_every_command(tmp_path):
    def result(readme, index, status):
        return corpus.Result(corpus.Command(readme, index, 1, tmp_path, []), status)

    results = [
        result("a", 1, "parity"),
        result("a", 2, "parity"),
        result("b", 1, "parity"),
        result("b", 2, "diff"),
        result("c", 1, "diff"),
        result("d", 1, "parity"),
        result("d", 2, "anchor-error"),
    ]
    assert corpus.recipe_figures(results) == (4, 3, 2, 6, 4)
    assert corpus.summarise(results)[-1] == "corpus: 4/7 parity"


def test_the_recorded_baseline_lists_the_full_corpus():
    lines = [ln for ln in corpus.BASELINE_FILE.read_text().splitlines() if ln and not ln.startswith("#")]
    statuses = [ln.split(" ", 1)[0] for ln in lines]
    assert set(statuses) <= {"parity", "diff", "refused", "anchor-error", "invalid", "unmapped"}
    assert len(lines) >= 260 and statuses.count("parity") >= 235
