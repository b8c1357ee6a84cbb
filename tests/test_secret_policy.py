"""helm_nemo.secret_policy: each rule and detector, with values that must be masked and realistic values that
must be shown; and helm_nemo.secrets applying it (collecting, --mask names, overlapping values)."""

from __future__ import annotations

import random
import string

import pytest

from helm_nemo import secret_policy as policy
from helm_nemo.secrets import MASK, Masker, collecting, is_secret, mask, mask_within, note


# --- rule 1: names ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "hf_token",
        "hfToken",
        "HFTOKEN",
        "GITHUB_PAT",
        "WANDB_API_KEY",
        "API_KEY",
        "apiKey",
        "KEY",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "DB_PASSWORD",
        "DBPASSWORD",
        "PGPASSWD",
        "SSH_PASSPHRASE",
        "CLIENT_SECRET",
        "MYSECRET",
        "GCP_CREDENTIALS",
        "REGISTRY_CREDS",
        "BASIC_AUTH",
        "PROXY_AUTHORIZATION",
        "SESSION_COOKIE",
        "WEBHOOK_SIGNATURE",
        "ENCRYPTION_KEY",
        "SSH_PRIVATE_KEY",
        "HF_TOKEN_2",
        "DB_PASSWORD_PROD",
        "KEY_VAULT_NAME",  # the words after KEY are not all reference words: the conservative side
    ],
)
def test_secret_looking_names_are_secret(name):
    assert policy.name_is_secret(name)


@pytest.mark.parametrize(
    "name",
    [
        "GCS_BUCKET",
        "PROJECT_ID",
        "KUEUE_NAME",
        "IMAGE_TAG",
        "KEYRING_PATH",  # KEYRING is another word than KEY
        "SSH_KEY_PATH",  # a path to a key
        "HF_TOKEN_FILE",
        "TOKEN_PATH",
        "SECRET_NAME",  # a Kubernetes Secret's name
        "AWS_ACCESS_KEY_ID",  # an id (the value detector still knows AKIA…)
        "AUTH_MODE",
        "SESSION_ID",
        "TOKENIZER_MODEL",
        "TOKENIZER_PATH",
        "MAX_TOKENS",
        "NUM_TOKENS_PER_BATCH",
        "AUTHOR",
        "MONKEY_PATCH",
        "PIN_MEMORY",
        "PRIVATE_IP",
        "PWD",
        "PATH",
        "NCCL_SOCKET_IFNAME",
    ],
)
def test_other_names_are_not(name):
    assert not policy.name_is_secret(name)


def test_names_are_cut_into_words():
    assert policy.name_words("hfApiKey") == ["HF", "API", "KEY"]
    assert policy.name_words("HF_TOKEN_2") == ["HF", "TOKEN", "2"]
    assert policy.name_words("S3Key") == ["S", "3", "KEY"]


# --- rule 2: values -----------------------------------------------------------------------------------------
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"
CREDENTIALS = {
    "Hugging Face token": [HF, f"Bearer {HF}", f"--token={HF}"],
    "GitHub token": ["ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "gho_" + "x" * 36, "github_pat_" + "11AB" * 12],
    "NGC API key": ["nvapi-" + "Zx9_" * 10],
    "GitLab token": ["glpat-" + "abcDEF123_-" * 2],
    "Slack token": ["xoxb-123456789012-abcdefABCDEF"],
    "OpenAI key": ["sk-proj-" + "Ab1" * 10],
    "Google API key": ["AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"],
    "AWS access key id": ["AKIAIOSFODNN7EXAMPLE", "ASIAY34FZKBOKMUTVV7A"],  # AWS's documentation's examples
    "JWT": [
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIy"
        "fQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"  # jwt.io's example
    ],
    "URL with a password": ["https://trainer:Pa55-w0rd@minio.internal/data", "postgres://u:p@db:5432/x", "s3://:k@h/b"],
    "private key": [
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    ],
    "service-account key": ['{"type": "service_account", "project_id": "p"}', '{"private_key_id": "abc"}'],
    "high-entropy string": [
        "q7Xk2LmP9vRt4WzN8bYc3HdJ",
        "wJalrXUtnFEMI+K7MDENG=bPxRfiCY2xK9qLmZ3v",
        "run-aZ3kP9qL2xM7vR4tW8yB",
    ],
}


@pytest.mark.parametrize("kind,value", [(k, v) for k, values in CREDENTIALS.items() for v in values])
def test_credentials_are_recognised_whatever_the_name(kind, value):
    assert policy.credential_kind(value) == kind
    assert policy.is_secret("MODEL", value)


# Realistic values that are not secrets, each one a kind a values file takes from the environment.
NOT_SECRETS = [
    "b",
    "bkt-ckpt",
    "my-training-bucket-us-central1",
    "gs://llama3-checkpoints-prod/run-2024-06-11/ckpt",
    "proj-1234",
    "supercomputer-testing",
    "a3-ultra",
    "ml-team",
    "nvcr.io/nvidia/nemo:25.02.01",
    "us-central1-docker.pkg.dev/supercomputer-testing/dlsl-metadata/recipe-runner@sha256:"
    "3b2f6c9e1d0a7f4b8c5e2d1a0f9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b",
    "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.8-1",
    "ghcr.io/NVIDIA/NeMo-Framework-Launcher:24.07",
    "123e4567-e89b-12d3-a456-426614174000",
    "0123456789abcdef0123456789abcdef01234567",  # a git commit
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",  # sha256 of nothing
    "llama3-70b-20240611-143012",
    "2026-01-01-00-00-00",
    "/mnt/data/Llama-3.1-70B-Instruct/tokenizer.model",
    "/gcs/checkpoints/Llama3_70B_32nodes_BF16/checkpoints",
    "meta-llama/Meta-Llama-3.1-70B-Instruct",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "nvidia/OpenMathInstruct2Dataset",
    "Qwen2ForCausalLMWithValueHead",
    "DeepseekV3ForCausalLM",
    "Gemma3ForConditionalGeneration",
    "projects/my-project/reservations/a3ultra-reservation-blocks/reservationBlocks/block-0001",
    "https://storage.googleapis.com/bucket/object",
    "git@github.com:NVIDIA/NeMo.git",
    "16",
    "1.10",
    "08",
    "yes",
    "WARN",
    "eth0,eth1,eth2",
    "-1",
    "ML team",
    "Team Queue",
]


@pytest.mark.parametrize("value", NOT_SECRETS)
def test_realistic_values_are_shown(value):
    assert policy.credential_kind(value) is None
    assert not policy.is_secret("VALUE", value)


def test_random_tokens_are_high_entropy_with_the_measured_miss_rate():
    """Random base62/base64 tokens are found (the miss rate the thresholds were chosen for, docs/security.md),
    hex is never (digests), lower-case runs are never (buckets, project ids)."""
    rng = random.Random(36)
    for length, most_missed in ((20, 0.05), (24, 0.03), (32, 0.01), (40, 0.005)):
        for alphabet in (string.ascii_letters + string.digits, string.ascii_letters + string.digits + "+="):
            tokens = ["".join(rng.choice(alphabet) for _ in range(length)) for _ in range(4000)]
            missed = sum(policy.high_entropy(token) is None for token in tokens) / len(tokens)
            assert missed <= most_missed, (length, missed)
    hex_digits = ["".join(rng.choice("0123456789abcdef") for _ in range(64)) for _ in range(200)]
    assert not any(policy.high_entropy(token) for token in hex_digits)
    lower = ["".join(rng.choice(string.ascii_lowercase + string.digits + "-") for _ in range(40)) for _ in range(200)]
    assert not any(policy.high_entropy(token) for token in lower)


def test_a_short_random_run_is_not_long_enough():
    """A run ends at any character identifiers are joined with (`/` too): the price of showing paths, a
    base64 secret cut by `/` into runs under 20 is found only by its name or --mask (docs/security.md)."""
    assert policy.high_entropy("q7Xk2LmP9vRt4WzN8bY") is None  # 19 characters
    assert policy.high_entropy("q7Xk2LmP9vRt4WzN8bYc") == "q7Xk2LmP9vRt4WzN8bYc"
    assert policy.high_entropy("run/q7Xk2LmP9vRt4WzN8bYc/x") == "q7Xk2LmP9vRt4WzN8bYc"  # inside a path


def test_entropy_and_word_length_measures():
    assert policy.entropy("aaaa") == 0 and policy.entropy("abcd") == 2
    assert policy.word_length("Qwen2ForCausalLM") == 16 / 5  # Qwen 2 For Causal LM


# --- rule 3 and the secrets module applying the policy ----------------------------------------------------
def test_mask_names_are_secret_whatever_they_hold():
    assert not policy.is_secret("GCS_BUCKET", "b")
    assert policy.is_secret("GCS_BUCKET", "b", masked=["GCS_BUCKET"])
    assert not is_secret("GCS_BUCKET", "b")  # outside a collecting block: no --mask names
    with collecting(mask=("GCS_BUCKET",)):
        assert is_secret("GCS_BUCKET", "b") and not is_secret("QUEUE", "b")


def test_only_secrets_noted_are_masked():
    with collecting() as active:
        note("bkt-ckpt", "GCS_BUCKET")
        note("tok-EXAMPLE-1234", "REGISTRY_TOKEN")
        note(HF, "MODEL_SOURCE")
        note("team-queue", "QUEUE")
        assert active.values == {"tok-EXAMPLE-1234", HF}
        assert (
            mask("LocalQueue default/team-queue, bucket bkt-ckpt") == "LocalQueue default/team-queue, bucket bkt-ckpt"
        )
        assert mask(f"pull with tok-EXAMPLE-1234 from {HF}") == f"pull with {MASK} from {MASK}"
    with collecting(mask=["QUEUE"]) as active:
        note("team-queue", "QUEUE")
        assert mask("LocalQueue default/team-queue") == f"LocalQueue default/{MASK}"
    with collecting(show=True, mask=["QUEUE"]):
        note("team-queue", "QUEUE")
        assert mask("LocalQueue default/team-queue") == "LocalQueue default/team-queue"  # --show-secrets


def test_overlapping_values_never_leave_a_part_in_clear():
    """Replacing the longest value first left the rest of a value it overlaps in clear (`***gh`)."""
    masker = Masker(["abcdef", "defgh"])
    assert masker.text("x abcdefgh y") == f"x {MASK} y"
    assert masker.text("defgh abcdef") == f"{MASK} {MASK}"
    assert Masker(["secret-value", "value-two"]).text("secret-value-two") == MASK
    assert Masker(["ab"]).text("'ab' and ab") == f"'{MASK}' and ab"  # short: only quoted or whole
    assert mask_within("abcdefgh", ["abcdef", "defgh"]) == MASK
    assert mask_within("u:1@h/1", ["1"]) == f"u:{MASK}@h/{MASK}"  # where it was substituted: every occurrence
