"""Golden manifests: every example under values/examples/ through the whole plugin pipeline
(load -> substitute -> files -> validate -> helm template), on Helm 3.17.2 and 4.1.4.

The two helm versions must render identical bytes, and the output must equal the reviewed snapshot in
tests/golden/examples/. To accept a change: `UPDATE_GOLDEN=1 make test`, review `git diff tests/golden`,
and say why in the commit message.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from conftest import API_VERSIONS, KUBE_VERSION, assert_golden
from helm_nemo.actions import releases
from helm_nemo.actions.helm import helm_binary
from helm_nemo.values.plan import build_plans

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "values" / "examples").glob("*.yaml"))
GOLDEN = ROOT / "tests" / "golden" / "examples"
# Stand-ins for the project-specific names the examples take from the environment.
ENV = {
    "GCS_BUCKET": "test-bucket",
    "KUEUE_NAME": "test-queue",
    "PROJECT_ID": "test-project-1",
    "ARTIFACT_REGISTRY": "us-central1-docker.pkg.dev/test-project/test-registry",
    "ECR_REGISTRY": "123456789012.dkr.ecr.us-west-2.amazonaws.com",
    "FSX_FILE_SYSTEM_ID": "fs-0123456789abcdef0",
    "FSX_DNS_NAME": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    "FSX_MOUNT_NAME": "abcdefgh",
}
PINNED = ["--kube-version", KUBE_VERSION] + [x for api in API_VERSIONS for x in ("--api-versions", api)]


def render(example: Path, helm_path: Path) -> str:
    plans = build_plans(example, ENV)
    out = io.StringIO()
    messages: list[str] = []
    rc = releases.template(
        plans, helm_binary(str(helm_path)), PINNED + ["--namespace", "ml-team"], out=out, echo=messages.append
    )
    assert rc == 0, "\n".join(messages)
    return out.getvalue()


def test_every_accelerator_has_an_example():
    from helm_nemo.generate.profiles import load_profiles

    named = {plan.accelerator for e in EXAMPLES for plan in build_plans(e, ENV)}
    missing = [acc for acc in load_profiles() if acc not in named]
    assert missing == ["p5en"], f"no example for {missing}"  # p5en shares p4de's and p5's


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_golden(example, helm3, helm4):
    rendered = render(example, helm3.binary)
    assert rendered == render(example, helm4.binary), "Helm 3 and Helm 4 render differently"
    golden = GOLDEN / f"{example.stem}.yaml"
    assert_golden(golden, rendered)
