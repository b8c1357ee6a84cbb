"""Naming an exception no signature knows, by what happened: its type and message, and where it was raised.

A traceback's frames say which code raised it (`…/site-packages/torch/serialization.py` is torch.serialization);
the `raised:` rules of signatures.yaml turn the innermost frame a rule names (or the exception's type, or the
raising function) into a class: a checkpoint, a download, the configuration, the data pipeline. An exception no
rule names stays a Python exception, titled by its own type and message and the package that raised it, so
`RuntimeError: Expected all tensors to be on the same device… (raised in torch.nn.functional)` says more than
"a Python exception".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.diagnose.lines import Signature

TITLE_WIDTH = 110
# where a package's modules start in an installed or checked-out path
_INSTALLED = re.compile(r"(?:site-packages|dist-packages)/(.+)$")
_STDLIB = re.compile(r"/lib/python\d(?:\.\d+)?/(?:lib-dynload/)?(.+)$")
# a checked-out package (`/opt/Megatron-LM/megatron/core/…`): its modules start at the package's own folder
_PACKAGES = (
    "megatron|nemo|nemo_run|lightning|pytorch_lightning|torch|transformers|deepspeed|trl|verl|openrlhf|torchtitan"
    "|accelerate|datasets|huggingface_hub|apex|transformer_engine|colossalai|fairseq|axolotl|llamafactory"
)
_CHECKOUT = re.compile(rf"/((?:{_PACKAGES})/.+)$")


@dataclass(frozen=True)
class Rule:
    """A `raised:` entry of signatures.yaml: what names an exception of its class."""

    klass: str
    modules: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    functions: re.Pattern[str] | None
    types: frozenset[str]
    words: re.Pattern[str] | None
    sources: re.Pattern[str] | None
    title: str
    hint: str


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    from helm_nemo.diagnose.lines import data

    out = []
    for item in data().get("raised") or []:
        modules = [m for m in item.get("modules") or [] if not m.startswith("^")]
        patterns = [re.compile(m) for m in item.get("modules") or [] if m.startswith("^")]
        functions = re.compile(item["functions"]) if item.get("functions") else None
        out.append(
            Rule(
                item["class"],
                tuple(modules),
                tuple(patterns),
                functions,
                frozenset(item.get("types") or ()),
                re.compile(item["words"]) if item.get("words") else None,
                re.compile(item["sources"]) if item.get("sources") else None,
                item["title"],
                item.get("hint", ""),
            )
        )
    return tuple(out)


# exceptions that say the code is wrong (a name, an attribute, a type), whatever words their message holds
PROGRAMMING = frozenset(
    {"AttributeError", "NameError", "UnboundLocalError", "TypeError", "SyntaxError", "IndentationError"}
)


def _stdlib(module: str) -> bool:
    import sys

    return module.split(".", 1)[0] in sys.stdlib_module_names


def module_of(path: str) -> str:
    """`torch.serialization` for `/usr/lib/python3/dist-packages/torch/serialization.py`; `train` for a script."""
    path = path.replace("\\", "/")
    found = _INSTALLED.search(path) or _CHECKOUT.search(path) or _STDLIB.search(path)
    rel = found.group(1) if found else path.rsplit("/", 1)[-1]
    if rel.endswith(".py"):
        rel = rel[:-3]
    parts = [p for p in rel.split("/") if p and p != "__init__"]
    return ".".join(parts)


def _names(rule: Rule, module: str) -> bool:
    if any(module == m or module.startswith(m + ".") for m in rule.modules):
        return True
    return any(p.search(module) for p in rule.patterns)


def classify(frames: list[tuple[str, int, str]], exception: str, message: str = "", source: str = "") -> Rule | None:
    """The rule that names this exception: by its type, the statement that raised it, the raising function, the
    innermost frame a rule's modules name, and last by the words of its message."""
    kind = exception.rsplit(".", 1)[-1]
    for rule in rules():
        if kind in rule.types:
            return rule
    if source:
        for rule in rules():
            if rule.sources is not None and rule.sources.search(source):
                return rule
    own = [frame for frame in frames if not _stdlib(module_of(frame[0]))]
    if own and kind not in PROGRAMMING:  # `'Group' object has no attribute 'load_checkpoint'` is a code bug
        function = own[-1][2]  # the raising function of the program or a library, not the stdlib's (os.environ[…])
        for rule in rules():
            if rule.functions is not None and rule.functions.search(function):
                return rule
    for path, _line, _function in reversed(frames):
        module = module_of(path)
        for rule in rules():
            if _names(rule, module):
                return rule
    if kind in PROGRAMMING:
        return None  # its message names identifiers of the code, not what the run was doing
    if message and not any(module_of(path).startswith("torch.utils.checkpoint") for path, _l, _f in frames):
        for rule in rules():
            if rule.words is not None and rule.words.search(message):
                return rule
    return None


def where(frames: list[tuple[str, int, str]]) -> str:
    """`torch.nn.functional (functional.py:2546 in embedding)`: the innermost frame outside the standard library
    (`os.environ[…]` raised the KeyError, the program asked for it), or ""."""
    if not frames:
        return ""
    own = [frame for frame in frames if not _stdlib(module_of(frame[0]))]
    path, line, function = (own or frames)[-1]
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{module_of(path)} ({name}:{line}" + (f" in {function})" if function else ")")


def headline(message: str, width: int = TITLE_WIDTH) -> str:
    """The exception's first line, cut to a readable length."""
    first = message.strip().splitlines()[0] if message.strip() else ""
    return first if len(first) <= width else first[: width - 1] + "…"


def as_signature(rule: Rule) -> Signature:
    from helm_nemo.diagnose.lines import Signature

    return Signature(f"raised-{rule.klass}", rule.klass, "cause", re.compile(r"$^"), rule.title, rule.hint)
