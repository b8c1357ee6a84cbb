"""Kubernetes resource quantities parsed exactly as the API server parses them.

A port of apimachinery's `resource.ParseQuantity` (k8s.io/apimachinery/pkg/api/resource/quantity.go,
Apache-2.0): its scanner and its two paths, quirks included. `1e3`, `1.5Gi`, `100m`, `1.`, `.5`, `+1`
and `e3` parse; `1e`, `1Ki3`, `1ki`, `１` (a non-ASCII digit) and `1_000` do not; a bare sign or `.`
is zero, and so are `Gi` or `m` without a number (the fast path never reads the missing digits), while
`Ei` is not (the slow path needs one). `json=True` first trims white space as `Quantity.UnmarshalJSON`
does for a field the API server decodes (`" 1Gi"`); an annotation a driver parses (`json=False`) is
taken as written.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation, ROUND_UP

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

_DIGITS = "0123456789"
_SUFFIX_CHARS = "eEinumkKMGTP"
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)  # Go's unicode.IsSpace, which strings.TrimSpace trims
_MAX_INT64 = 2**63 - 1
_NANO = Decimal("1e-9")


def _scan(text: str) -> tuple[bool, str, str, str, str] | None:
    """parseQuantityString: (positive, value, num, denom, suffix), or None for ErrFormatWrong."""
    positive, pos, end = True, 0, len(text)
    if text[:1] == "-":
        positive, pos = False, 1
    elif text[:1] == "+":
        pos = 1
    while pos < end and text[pos] == "0":  # leading zeros
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, text, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value, suffix_start = text[:pos], pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        return None
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """quantitySuffixer.interpret: (base, exponent, format)."""
    if suffix in _BINARY:
        return 2, _BINARY[suffix], "BinarySI"
    if suffix in _DECIMAL:
        return 10, _DECIMAL[suffix], "DecimalSI"
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[:1] in "+-" else digits
        if not body or any(c not in _DIGITS for c in body):
            return None
        exponent = int(digits)
        if not -(2**63) <= exponent < 2**63:
            return None
        exponent = (exponent + 2**31) % 2**32 - 2**31  # Go's int32(parsed)
        return 10, exponent, "DecimalExponent"
    return None


def parse_quantity(value: Any, *, json: bool = True) -> Decimal | None:
    """A Kubernetes resource.Quantity as a Decimal, or None when the API server would refuse it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            exact = Decimal(str(value))
        except InvalidOperation:  # pragma: no cover - inf/nan
            return None
        return exact if exact.is_finite() else None
    if not isinstance(value, str):
        return None
    text = value.strip(_GO_SPACE) if json else value
    if text == "":
        return None
    if text == "0":
        return Decimal(0)
    scanned = _scan(text)
    if scanned is None:
        return None
    positive, number, num, denom, suffix = scanned
    interpreted = _interpret(suffix)
    if interpreted is None:
        return None
    base, exponent, form = interpreted
    sign = 1 if positive else -1
    mantissa, precision, scale = 1, 0, 0
    if form in ("DecimalExponent", "DecimalSI"):
        scale, precision = exponent, 18 - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            shifted = int(num + denom)
            if abs(shifted * mantissa) <= _MAX_INT64:  # the int64 fast path: done, digits or not
                return sign * shifted * mantissa * Decimal(10) ** scale
    if not any(c in _DIGITS for c in number):  # inf.Dec.SetString needs a digit
        return None
    amount = abs(Decimal(number)) * (Decimal(10) ** exponent if base == 10 else Decimal(2) ** exponent)
    if amount != 0:
        places = amount.as_tuple().exponent  # an int: amount is finite
        amount = amount.quantize(_NANO, rounding=ROUND_UP) if isinstance(places, int) and places < -9 else amount
    if form == "BinarySI" and amount > _MAX_INT64:
        amount = Decimal(_MAX_INT64)
    return sign * amount


def is_extended(resource: str) -> bool:
    """Extended resources (device plugins: nvidia.com/gpu, vpc.amazonaws.com/efa): whole numbers, requests = limits."""
    return (
        "/" in resource
        and not resource.startswith(("kubernetes.io/", "requests."))
        and not resource.split("/", 1)[0].endswith(".kubernetes.io")
    )
