"""Recipe orchestration: install in order, stop at the first failure saying what is installed,
uninstall in reverse, values to helm as JSON on stdin, the install time stamped.

helm itself is replaced here by a recording stand-in (a shell script), because these tests are about
the order and the messages; tests/test_install_emulated.py runs the real helm against an API emulator.
"""

from __future__ import annotations

import json
import stat
from datetime import datetime, UTC
from pathlib import Path

import pytest

from helm_nemo.actions import releases
from helm_nemo.actions.helm import HelmBinary
from helm_nemo.values.plan import build_plans

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "values/examples/a3ultra-405b.yaml"
ENV = {"GCS_BUCKET": "test-bucket", "KUEUE_NAME": "test-queue", "PROJECT_ID": "test-project-1"}


@pytest.fixture()
def fake_helm(tmp_path):
    """A helm that logs each call (argv + the values it read on stdin) and fails for $FAIL_RELEASE."""
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "helm"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import json, os, sys\n"
        "argv = sys.argv[1:]\n"
        "stdin = sys.stdin.read() if '-' in argv else ''\n"
        f"open({str(log)!r}, 'a').write(json.dumps({{'argv': argv, 'stdin': stdin}}) + '\\n')\n"
        "if argv[0] == 'template':\n"
        "    print('---\\napiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: ' + argv[1])\n"
        "sys.exit(3 if os.environ.get('FAIL_RELEASE') in argv else 0)\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return HelmBinary(str(script)), calls


def test_install_runs_releases_in_order_with_json_values(fake_helm):
    helm, calls = fake_helm
    messages: list[str] = []
    now = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
    rc = releases.install(build_plans(RECIPE, ENV), helm, ["--wait"], echo=messages.append, now=now)
    assert rc == 0
    made = calls()
    assert [c["argv"][:2] for c in made] == [
        ["install", "llama31-405b-supervisor"],
        ["install", "llama31-405b-storage"],
        ["install", "llama31-405b"],
    ]
    for call in made:
        assert call["argv"][3:5] == ["-f", "-"] and call["argv"][-1] == "--wait"
    workload = json.loads(made[2]["stdin"])
    assert workload["workload"]["jobTimestamp"] == "2026-11-22-10-00-00"  # install time, from the plugin
    assert "files" not in workload and workload["workload_launcher"].startswith("#!/bin/bash")
    assert json.loads(made[1]["stdin"])["gcsVolumes"][0]["bucketName"] == "test-bucket"
    assert "jobTimestamp" not in json.dumps(json.loads(made[0]["stdin"]))  # the supervisor has no such value
    assert messages[0].startswith("[1/3] install llama31-405b-supervisor")


def test_install_stops_at_the_first_failure_and_says_what_is_installed(fake_helm, monkeypatch):
    helm, calls = fake_helm
    monkeypatch.setenv("FAIL_RELEASE", "llama31-405b-storage")
    messages: list[str] = []
    rc = releases.install(build_plans(RECIPE, ENV), helm, [], echo=messages.append)
    assert rc == 3
    assert [c["argv"][1] for c in calls()] == ["llama31-405b-supervisor", "llama31-405b-storage"]
    assert "Installed by this run: llama31-405b-supervisor." in messages[-2]
    assert "helm nemo uninstall --values" in messages[-1]


def test_uninstall_goes_in_reverse(fake_helm):
    helm, calls = fake_helm
    assert releases.uninstall(build_plans(RECIPE, ENV), helm, ["--wait"], echo=lambda m: None) == 0
    assert [c["argv"] for c in calls()] == [
        ["uninstall", "llama31-405b", "--wait"],
        ["uninstall", "llama31-405b-storage", "--wait"],
        ["uninstall", "llama31-405b-supervisor", "--wait"],
    ]


def test_uninstall_reports_every_failure(fake_helm, monkeypatch):
    helm, calls = fake_helm
    monkeypatch.setenv("FAIL_RELEASE", "llama31-405b")
    messages: list[str] = []
    assert releases.uninstall(build_plans(RECIPE, ENV), helm, [], echo=messages.append) == 1
    assert len(calls()) == 3  # it still tries the others
    assert messages[-1] == "helm nemo: could not uninstall: llama31-405b"


def test_upgrade_install_flag(fake_helm):
    helm, calls = fake_helm
    example = ROOT / "values/examples/a4-llama31-405b.yaml"
    assert (
        releases.install(build_plans(example, ENV), helm, [], upgrade=True, install_missing=True, echo=lambda m: None)
        == 0
    )
    # First the installed release's values (an upgrade keeps its job timestamp), then the upgrade.
    assert calls()[0]["argv"][:4] == ["get", "values", "llama31-405b-a4", "-o"]
    assert calls()[1]["argv"][:3] == ["upgrade", "--install", "llama31-405b-a4"]


def test_template_writes_every_release(fake_helm):
    import io

    helm, calls = fake_helm
    out = io.StringIO()
    assert releases.template(build_plans(RECIPE, ENV), helm, [], out=out, echo=lambda m: None) == 0
    # the releases render side by side (one helm each), so the calls may be logged in any order
    rendered = {c["argv"][1]: c for c in calls() if c["argv"][0] == "template"}
    assert sorted(rendered) == sorted(plan.release for plan in build_plans(RECIPE, ENV))
    # The run identity install would give, from the clock or (here, conftest) SOURCE_DATE_EPOCH.
    assert json.loads(rendered["llama31-405b"]["stdin"])["workload"]["jobTimestamp"] == "2026-01-01-00-00-00"
