"""Which values from the environment are secrets: the one policy every printer's masking follows.

helm nemo masks (`***`) a value it took from the environment when any of these holds, and shows it
otherwise, so a wrong bucket or queue name can be read in the error that names it (docs/security.md):

1. **The variable's name says it holds secret material** (`name_is_secret`). The name is cut into words
   (`HF_TOKEN` -> HF, TOKEN; `hfToken` -> HF, TOKEN); it is secret when a word is one of SECRET_WORDS, or
   ends with one of GLUED_WORDS (`HFTOKEN`, `DBPASSWORD`), and the words after the last such word are not
   all REFERENCE_WORDS. A name says what it holds with its last words: `SSH_KEY_PATH`, `HF_TOKEN_FILE`,
   `SECRET_NAME` and `KEY_ID` hold a path, a file, a name or an id *of* a secret and are shown, while
   `API_KEY`, `HF_TOKEN_2` and `DB_PASSWORD_PROD` are masked. Whole words only: `KEYRING_PATH`,
   `TOKENIZER_MODEL`, `MAX_TOKENS`, `AUTHOR` and `MONKEY` are not secret names.
2. **The value looks like a credential, whatever the name** (`credential_kind`): a token with a
   well-known prefix (Hugging Face, GitHub, NGC, GitLab, Slack, OpenAI, Google API keys, AWS access key
   ids), a JWT, a URL with a password, a PEM private key, a GCP service-account key, or a long
   high-entropy run (`high_entropy`; what "long" and "high" mean, and why, is said there).
3. **The user names the variable** (`--mask VAR`, repeatable, on every command that substitutes values).

Library use: `is_secret(name, value, masked=())`; helm_nemo.secrets applies it to the values the
substitution takes from the environment (with the command's `--mask` names) and masks what it says.
"""

from __future__ import annotations

import math
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

# Words that mean "this holds secret material". Not: TOKENS (MAX_TOKENS, a count), PWD (the shell's working
# directory), KEYRING/KEYSTORE (a place holding keys, named by path), PIN (PIN_MEMORY), CERT (a certificate
# is public; its key is a KEY), PRIVATE (PRIVATE_IP, PRIVATE_CLUSTER; a private key is a KEY, and its PEM
# block is masked whatever the name).
SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "SECRETS",
        "KEY",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "AUTHORIZATION",
        "SESSION",
        "COOKIE",
        "SIGNATURE",
        "PAT",  # personal access token: GITHUB_PAT
        "SALT",
    }
)
# Secret words that are often glued to a prefix without an underscore: HFTOKEN, DBPASSWORD, MYSECRET.
GLUED_WORDS = ("TOKEN", "PASSWORD", "PASSWD", "SECRET", "APIKEY", "ACCESSKEY", "CREDENTIALS", "CREDENTIAL")
# Words after a secret word that make the name one of a reference *to* a secret, not the secret itself.
REFERENCE_WORDS = frozenset(
    {
        "PATH",
        "PATHS",
        "FILE",
        "FILES",
        "FILENAME",
        "DIR",
        "DIRECTORY",
        "NAME",
        "NAMES",
        "ID",
        "IDS",
        "REF",
        "ARN",
        "URL",
        "URI",
        "ENDPOINT",
        "HOST",
        "PORT",
        "REGION",
        "TYPE",
        "MODE",
        "KIND",
        "ENABLED",
        "DISABLED",
        "ENABLE",
        "DISABLE",
        "REQUIRED",
        "LENGTH",
        "LEN",
        "SIZE",
        "COUNT",
        "TTL",
        "TIMEOUT",
        "EXPIRY",
        "VERSION",
        "MOUNT",
        "LOCATION",
        "PROVIDER",
        "METHOD",
        "FORMAT",
    }
)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_words(name: str) -> list[str]:
    """`HF_TOKEN` -> [HF, TOKEN]; `hfApiKey` -> [HF, API, KEY]; `S3_KEY` -> [S, 3, KEY] (upper case)."""
    return [word.upper() for word in _WORD.findall(name)]


def _secret_word(word: str) -> bool:
    return word in SECRET_WORDS or any(word.endswith(glued) for glued in GLUED_WORDS)


def name_is_secret(name: str) -> bool:
    """Rule 1 of the module doc: the name has a secret word, and not only reference words after the last one."""
    words = name_words(name)
    last = max((index for index, word in enumerate(words) if _secret_word(word)), default=-1)
    if last < 0:
        return False
    after = words[last + 1 :]
    return not after or not all(word in REFERENCE_WORDS for word in after)


# Rule 2: credentials recognised by their form. (kind, pattern searched anywhere in the value.)
_EDGE = r"(?<![A-Za-z0-9])"
CREDENTIAL_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("Hugging Face token", _EDGE + r"hf_[A-Za-z0-9]{30,}"),
        ("GitHub token", _EDGE + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
        ("NGC API key", _EDGE + r"nvapi-[A-Za-z0-9_-]{30,}"),
        ("GitLab token", _EDGE + r"glpat-[A-Za-z0-9_-]{20,}"),
        ("Slack token", _EDGE + r"xox[abposr]-[A-Za-z0-9-]{10,}"),
        ("OpenAI key", _EDGE + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
        ("Google API key", _EDGE + r"AIza[A-Za-z0-9_-]{35}"),
        ("AWS access key id", _EDGE + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}(?![A-Za-z0-9])"),
        ("JWT", _EDGE + r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
        ("URL with a password", r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:[^/\s@]+@"),
        ("private key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"),
        ("service-account key", r'"(?:private_key|private_key_id)"\s*:|"type"\s*:\s*"service_account"'),
    )
)

# Rule 2, the generic case: a long high-entropy run. Measured (docs/security.md, "Detectors"):
# * a run is a maximal stretch of [A-Za-z0-9+=]: identifiers people write (buckets, images, paths, model and
#   run names) are words joined by - _ / . : @, so their runs are short; random tokens are one long run;
# * long: at least MIN_RUN characters (an AWS key id is 20; 128 random bits in base62 are 22);
# * it mixes upper case, lower case and digits: GCS buckets, project ids, Kubernetes names and hex digests
#   (sha256, git commits, UUIDs) are lower case, and a random base62 run of 20 lacks a class with p < 1e-3;
# * Shannon entropy of at least MIN_ENTROPY bits a character (random base62 of 20 characters: 0.1st
#   percentile 3.48, median 4.02);
# * it does not read as words: cut where the kind of character changes (`Qwen2ForCausalLM` -> Qwen, 2, For,
#   Causal, LM), its pieces average at most MAX_WORD_LENGTH characters. Random base62: median 1.9, 99th
#   percentile 3.3 at 20 characters and 2.7 at 40; CamelCase names: 3.5 (DeepseekV3ForCausalLM) to 6.0.
MIN_RUN = 20
MIN_ENTROPY = 3.5
MAX_WORD_LENGTH = 3.0
_RUN = re.compile(rf"[A-Za-z0-9+=]{{{MIN_RUN},}}")
_PIECE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^A-Za-z0-9]")


def entropy(text: str) -> float:
    """Shannon entropy of the characters of `text`, in bits a character."""
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values()) if text else 0.0


def word_length(text: str) -> float:
    """The mean length of `text`'s pieces, cut where the kind of character changes (CamelCase words, numbers)."""
    return len(text) / max(1, len(_PIECE.findall(text)))


def high_entropy(value: str) -> str | None:
    """The first run of `value` that looks random (see MIN_RUN and the comment above it), or None."""
    for match in _RUN.finditer(value):
        run = match.group(0)
        if not (any(c.isupper() for c in run) and any(c.islower() for c in run) and any(c.isdigit() for c in run)):
            continue
        if entropy(run) >= MIN_ENTROPY and word_length(run) <= MAX_WORD_LENGTH:
            return run
    return None


def credential_kind(value: str) -> str | None:
    """What `value` looks like when it looks like a credential (rule 2), else None."""
    for kind, pattern in CREDENTIAL_PATTERNS:
        if pattern.search(value):
            return kind
    return "high-entropy string" if high_entropy(value) else None


def is_secret(name: str, value: str, masked: Iterable[str] = ()) -> bool:
    """Whether the value `name` holds is masked: rules 1-3 of the module doc (`masked`: the --mask names)."""
    return name in set(masked) or name_is_secret(name) or credential_kind(value) is not None
