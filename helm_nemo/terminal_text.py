"""Text that is safe to print on a terminal: what a pod's log holds is written by whatever runs in the
container, and the operator's terminal must not obey it (docs/security.md, "Terminal safety").

`safe(text)` parses ECMA-48 escape and control sequences, in their 7-bit (ESC …) and 8-bit (C1) forms:
- removed, as they only colour or move the cursor (a coloured log stays readable): CSI (ESC [ / 0x9B … final
  byte), character-set designations (ESC ( B …);
- shown visibly, cut short, as the user should know something was there: the control strings OSC (ESC ] /
  0x9D: window title, clipboard write, hyperlink), DCS (ESC P / 0x90), SOS (ESC X / 0x98), PM (ESC ^ / 0x9E)
  and APC (ESC _ / 0x9F), ended by BEL, ST (ESC \\ / 0x9C), or, unterminated, at the line's end (never
  further: an unterminated string does not swallow the lines after it), as `\\x1b]52;c;SGVsbG8…`; other
  escapes (ESC c, ESC 7, a lone ESC) as `\\x1bc`; other C0 controls, DEL and C1 as `\\x07`; invisible
  format characters that can disguise text (bidi overrides and isolates, zero-width space, BOM, tag
  characters) as `\\u202e`;
- kept: newline and tab. A carriage return ends a line, as the diagnosis reads it: CR LF and a lone CR (a
  progress bar's redraw) become a newline, so every redraw is shown and none hides the text before it.
The result holds no control character but newline and tab, and `safe(safe(t)) == safe(t)`. Text with none
of these characters is returned as is after one regex scan.

`escape_json(document)` makes a JSON document (json.dumps with ensure_ascii=False) safe the same way while
keeping the text: DEL, C1 and the format characters become \\u escapes (json.dumps escapes C0 already).

`Stream` is `safe` for text that arrives in pieces (`logs -f`): each piece is printed up to its last line end,
and the rest waits for the next piece (no sequence spans a line end).
"""

from __future__ import annotations

import re

# Invisible format characters that can disguise text: soft hyphen, Arabic letter mark, Mongolian vowel
# separator, zero-width space, LRM/RLM, line/paragraph separators, bidi embeddings/overrides (U+202A–E),
# word joiner and invisible operators, bidi isolates (U+2066–9), deprecated format characters, BOM,
# interlinear annotations, tag characters (invisible ASCII). ZWJ/ZWNJ and variation selectors stay: emoji
# and scripts need them.
_FORMAT = (
    "\u00ad\u061c\u180e\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f"
)
# Anything safe() changes starts with one of these: C0 but tab and newline, DEL, C1, the format characters.
_ANY = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}]")
# CSI is removed as a token in its place, never by a pass before the others: removing it first joins what is
# around it into a sequence the text does not hold (ESC, CSI, "]" is a lone ESC and a plain "]", not an OSC;
# CR, CSI, LF is two line ends, not one), and what a piece of a stream would print would differ from the whole.
_CSI_BODY = r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
# The body of a control string: up to its terminator, an ESC (which aborts it), CAN/SUB, or the line's end.
_BODY = "[^\x07\x1b\x9c\n\r\x18\x1a]*"
_TOKEN = re.compile(
    f"(?P<csi>{_CSI_BODY})"
    f"|(?P<string>(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])(?P<body>{_BODY})(?P<end>\x07|\x1b\\\\|\x9c)?)"
    "|(?P<designate>\x1b[\x20-\x2f]+[\x30-\x7e]?)"
    "|(?P<esc>\x1b[\x30-\x7e]?)"
    "|(?P<cr>\r\n?)"
    f"|(?P<other>[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT}])"
)
PREVIEW = 24  # characters of a control string's body shown
HOLD = 1 << 16  # the most a Stream holds back


def _visible(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _printable(text: str) -> str:
    return "".join(c if " " <= c <= "~" else "?" for c in text)


def _replace(match: re.Match[str]) -> str:
    kind = match.lastgroup
    if kind == "string":
        intro = _visible(match[0][0]) + (match[0][1] if match[0][0] == "\x1b" else "")
        body = match["body"]
        end = match["end"] or ""
        end = _visible(end[0]) + end[1:] if end else ""
        return intro + _printable(body[:PREVIEW]) + ("…" if len(body) > PREVIEW else "") + end
    if kind in ("designate", "csi"):
        return ""
    if kind == "esc":
        return "\\x1b" + _printable(match[0][1:])
    if kind == "cr":
        return "\n"
    return _visible(match[0])


def safe(text: str) -> str:
    """`text` with every escape sequence and control character removed or shown visibly (module docstring);
    the same string when it holds none."""
    if _ANY.search(text) is None:
        return text
    parts: list[str] = []
    done = 0
    found = _ANY.search(text)
    while found is not None:  # _TOKEN tried only where _ANY found a start: a regex scan between them
        token = _TOKEN.match(text, found.start())
        assert token is not None  # every character _ANY finds starts a token
        parts += (text[done : token.start()], _replace(token))
        done = token.end()
        found = _ANY.search(text, done)
    parts.append(text[done:])
    return "".join(parts)


_JSON_RAW = re.compile(f"[\x7f-\x9f{_FORMAT}]")


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match[0])
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def escape_json(document: str) -> str:
    """A JSON document with DEL, C1 and the format characters \\u-escaped: the same value once parsed (they
    can only be inside its strings), nothing a terminal acts on when it is printed."""
    if _JSON_RAW.search(document) is None:
        return document
    return _JSON_RAW.sub(_json_escape, document)


class Stream:
    """`safe` over a text given in pieces (`logs -f`): what is printed is what `safe` prints for the whole.

    No sequence spans a line end (a control string stops at one; CSI, ESC and designations hold no LF or CR), so
    `safe` of the text up to a line end, then of the rest, is `safe` of the whole. A piece is printed up to its
    last line end, a LF or a CR followed by something else than LF (a progress bar's redraw is printed when the
    next one starts); the rest waits for the next piece, up to HOLD characters. `close()` gives what is left."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = text.rfind("\n") + 1
        redraw = text.rfind("\r", cut, len(text) - 1) + 1  # a CR with something after it that is not a LF
        cut = max(cut, redraw)
        if len(text) - cut > HOLD:
            cut = len(text)
        self._held = text[cut:]
        return safe(text[:cut])

    def close(self) -> str:
        text, self._held = self._held, ""
        return safe(text)
