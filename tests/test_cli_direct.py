"""The hot release commands run without click (cli/direct.py) only when click would read the command line
the same way: every line the direct parser accepts must give exactly click's parameters, with nothing
passed through to helm; every line it declines goes to click. And start-up stays lean: the modules a
template run imports before helm gets its values do not load `inspect`/`ast` (DEFERRED_MODULES) or `typing`.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import sys
from pathlib import Path

import click
import pytest

from helm_nemo.cli import direct
from helm_nemo.cli.group import main as group


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("direct")
    (base / "a.yaml").write_text("chart: jobset\n")
    (base / "folder").mkdir()
    (base / "file-root").write_text("")
    return {
        "file": str(base / "a.yaml"),
        "other": str(base / "b.yaml"),
        "dir": str(base / "folder"),
        "file_root": str(base / "file-root"),
        "missing": str(base / "missing"),
    }


def click_reading(command: str, args: list[str]):
    """(params, args passed through to helm, the flag taken back from RELEASE), or None when click refuses."""
    cmd = group.get_command(click.Context(group), command)
    try:
        ctx = cmd.make_context(command, list(args))
    except (click.exceptions.Exit, click.ClickException):
        return None
    return dict(ctx.params), list(ctx.args), ctx.meta.get("helm_nemo_first_flag")


def agree(command: str, args: list[str]) -> bool:
    """True when the direct parser accepted `args` (after checking it read them as click does)."""
    params = direct.parse(command, args)
    if params is None:
        return False
    reading = click_reading(command, args)
    assert reading is not None, f"direct accepted what click refuses: {command} {args}"
    click_params, passed, first = reading
    assert (passed, first) == ([], None), f"click passes {passed} {first} to helm: {command} {args}"
    assert params == click_params, f"{command} {args}"
    return True


def test_lines_users_type_are_read_as_click_reads_them(places):
    f, g, d = places["file"], places["other"], places["dir"]
    accepted = [
        ("template", ["--values", f]),
        ("template", ["-f", f]),
        ("template", [f"-f{f}"]),
        ("template", [f"--values={f}"]),
        ("template", ["-f", "-"]),
        ("template", ["--values", f, "--values", g]),
        ("template", ["-f", f, "-f", "-"]),
        ("template", ["myrun", "-f", f]),
        ("template", ["-f", f, "myrun"]),
        ("template", ["-f", f, "--skip-manifest-validation", "--show-secrets"]),
        ("template", ["-f", f, "--target", "slurm"]),
        ("template", ["-f", f, "--target=kubernetes"]),
        ("template", ["-f", f, "-n", "team"]),
        ("template", ["-f", f, "-nteam"]),
        ("template", ["-f", f, "--namespace=team"]),
        ("template", ["-f", f, "--chart", "jobset", "--version", "1.1.0", "--chart-repo", "oci://r/x"]),
        ("template", ["-f", f, "--root", d]),
        ("template", ["-f", f, "-n", "a", "-n", "b"]),
        ("template", ["-f", f, "--mask", "GCS_BUCKET"]),
        ("install", ["-f", f, "--mask", "A", "--mask=B", "--show-secrets"]),
        ("install", ["-f", f, "run-1", "--skip-manifest-validation"]),
        ("install", ["-f", f, "--target", "slurm"]),
        ("lint", ["-f", f, "--kube-version", "1.30"]),
        ("lint", ["-f", f, "--kube-version=1.34"]),
        ("upgrade", ["-f", f, "-i"]),
        ("upgrade", ["-f", f, "--install", "--diff"]),
        ("upgrade", ["-f", f, "--skip-manifest-validation"]),
        ("template", ["-f", f, "--no-fit-error"]),
        ("install", ["-f", f, "--no-fit-error", "--no-preflight"]),
        ("lint", ["-f", f, "--no-fit-error"]),
        ("upgrade", ["-f", f, "-i", "--no-fit-error"]),
        ("uninstall", ["-f", f]),
        ("uninstall", ["-f", f, "--target", "slurm", "-n", "x"]),
    ]
    for command, args in accepted:
        assert agree(command, args), f"direct declined {command} {args}"


def test_lines_with_anything_unusual_go_to_click(places):
    f, d = places["file"], places["dir"]
    declined = [
        ("template", []),
        ("template", ["--help"]),
        ("template", ["-h"]),
        ("template", ["-f", f, "--plain-http"]),
        ("template", ["-f", f, "--set", "a=b"]),
        ("template", ["-f", f, "--", "x"]),
        ("template", ["-f"]),
        ("template", ["-f", f, "--chart"]),
        ("template", ["-f", f, "--chart", "--x"]),
        ("template", ["-f", d]),
        ("template", ["-f", f, "--root", places["missing"]]),
        ("template", ["-f", f, "--root", places["file_root"]]),
        ("template", ["-f", f, "--target", "mars"]),
        ("template", ["-f", f, "one", "two"]),
        ("template", ["-f", f, "-"]),
        ("template", ["-f", f, "--show-secrets=true"]),
        ("template", ["--values="]),
        ("upgrade", ["-f", f, "-if"]),
        ("lint", ["-f", f, "--target", "slurm"]),
        ("template", ["-f", f, "--kube-version", "1.30"]),
        ("status", ["-f", f]),
        ("diff", ["-f", f]),
        ("validate", ["-f", f]),
        ("generate", []),
        ("nope", ["-f", f]),
    ]
    for command, args in declined:
        assert direct.parse(command, args) is None, f"{command} {args}"


def test_random_lines_agree_with_click(places):
    """Lines drawn from every option, value and stray token: whatever the direct parser accepts, click reads the
    same; a fair share is accepted, so the check is not vacuous."""
    f, g = places["file"], places["other"]
    pool = [
        "-f",
        "--values",
        f,
        g,
        "-",
        f"-f{g}",
        f"--values={f}",
        "--root",
        places["dir"],
        places["missing"],
        "--show-secrets",
        "--mask",
        "--mask=QUEUE",
        "GCS_BUCKET",
        "--chart",
        "jobset",
        "--version",
        "1.1.0",
        "--chart-repo",
        "oci://r/x",
        "-n",
        "ns",
        "--namespace=ns",
        "--skip-manifest-validation",
        "--target",
        "slurm",
        "kubernetes",
        "--kube-version",
        "1.30",
        "-i",
        "--install",
        "--diff",
        "run",
        "--plain-http",
        "--set",
        "a=b",
        "--",
        "-x",
        "--debug",
        "-h",
    ]
    rng = random.Random(19)
    accepted = 0
    for command in ("template", "install", "lint", "upgrade", "uninstall"):
        for _ in range(400):
            args = ["-f", f] if rng.random() < 0.7 else []
            args += [rng.choice(pool) for _ in range(rng.randint(0, 6))]
            rng.shuffle(args) if rng.random() < 0.3 else None
            accepted += agree(command, args)
    assert accepted > 300


def test_every_option_of_the_direct_commands_is_one_click_declares():
    """The option tables in cli/direct.py are a copy of cli/releases.py's declarations: the same names, the
    same parameters, flags as flags."""
    for command, (options, defaults) in direct.COMMANDS.items():
        cmd = group.get_command(click.Context(group), command)
        declared = {}
        for param in cmd.params:
            if isinstance(param, click.Option):
                for name in param.opts:
                    declared[name] = (
                        param.name,
                        "flag" if param.is_flag else ("values" if param.multiple else "value"),
                    )
        assert options == declared, command
        assert set(defaults) | set(direct._COMMON_DEFAULTS) == {p.name for p in cmd.params}, command


HOT_MODULES = [
    "helm_nemo.cli.direct",
    "helm_nemo.cli.release_commands",
    "helm_nemo.values.plan",
    "helm_nemo.values.release_plan",
    "helm_nemo.values.chart_source",
    "helm_nemo.values.chart_values",
    "helm_nemo.values.file_refs",
    "helm_nemo.values.load",
    "helm_nemo.values.loaded",
    "helm_nemo.values.helm_yaml",
    "helm_nemo.values.substitute",
    "helm_nemo.values.validation",
    "helm_nemo.validate.checks.names",
    "helm_nemo.actions.releases",
    "helm_nemo.actions.process",
    "helm_nemo.actions.helm",
    "helm_nemo.timings",
]


def test_modules_loaded_before_helm_starts_skip_inspect_and_typing():
    code = (
        "import sys\n"
        "from helm_nemo.cli import _defer_rare_modules\n"
        "_defer_rare_modules()\n"
        f"for name in {HOT_MODULES!r}:\n"
        "    __import__(name)\n"
        "loaded = sorted(m for m in ('inspect', 'ast', 'dis', 'tokenize', 'typing', 'click', 'jsonschema') "
        "if m in sys.modules and '__file__' in vars(sys.modules[m]))\n"  # vars(): no attribute read that loads it
        "print(loaded)\n"
        "import inspect\n"
        "print(str(inspect.signature(lambda a, b=1: a)), sys.modules['inspect'].__file__ is not None)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    loaded, used = proc.stdout.splitlines()
    assert loaded == "[]"
    assert used == "(a, b=1) True"  # the stand-in loads the real module on first use


def test_a_dataclass_without_docstring_would_load_inspect():
    """Why every dataclass has a docstring: without one, dataclasses asks inspect for a signature at class
    creation (so the deferral above would silently stop paying)."""
    import ast

    missing = []
    for path in sorted((Path(__file__).resolve().parent.parent / "helm_nemo").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ClassDef)
                and any(
                    getattr(d, "id", None) == "dataclass"
                    or getattr(getattr(d, "func", None), "id", None) == "dataclass"
                    for d in node.decorator_list
                )
                and ast.get_docstring(node) is None
            ):
                missing.append(f"{path.name}:{node.lineno} {node.name}")
    assert missing == []


def test_direct_and_click_runs_print_the_same(tmp_path):
    """The same template command through the direct parser (the script) and through click (an option helm
    gets makes it go to click: --kube-version, which changes nothing for this chart at 1.32): same output."""
    root = Path(__file__).resolve().parent.parent
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "SOURCE_DATE_EPOCH": "1700000000",
        "HELM_BIN": str(root / ".tools/helm4/helm"),
        "GCS_BUCKET": "direct-bucket",
        "KUEUE_NAME": "q",
        "PROJECT_ID": "p",
    }
    values = root / "values/examples/a4-llama31-405b.yaml"
    script = str(Path(sys.executable).parent / "helm-nemo")
    runs = [
        subprocess.run([script, "template", "--values", str(values), *extra], env=env, capture_output=True, text=True)
        for extra in ([], ["--kube-version", "1.32"])
    ]
    assert direct.parse("template", ["--values", str(values)]) is not None
    assert direct.parse("template", ["--values", str(values), "--kube-version", "1.32"]) is None
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.count("\nkind: ") >= 1


def test_combinations_of_the_common_options_agree(places):
    f = places["file"]
    forms = [[], ["--show-secrets"], ["-n", "ns"], ["--chart", "jobset"], ["--version", "2"], ["rel"]]
    for command in direct.COMMANDS:
        for a, b in itertools.combinations(forms, 2):
            assert agree(command, ["-f", f, *a, *b])
