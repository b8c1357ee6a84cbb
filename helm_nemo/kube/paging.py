"""LIST page by page, and big answers decoded with the garbage collector out of the way.

A collection is asked for `limit` items at a time. The next page is asked for as soon as this one's continue
token arrives (the API server writes the list's metadata before its items, so the token is in the answer's
first bytes): the server makes the next page while this one is still on the wire and being decoded, up to
LOOKAHEAD pages at once. Decoding a page of pods makes a dict or list for every JSON object and array:
`decode` pauses the cyclic collector for a big answer and freezes what it made.
"""

from __future__ import annotations

import json
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any, Protocol

    class Request(Protocol):
        """KubeClient.request: (method, path, query, on_head=) -> (status, body, content type); `on_head` is
        called with the answer's first bytes (decompressed) while the rest is still being read."""

        def __call__(
            self, method: str, path: str, query: dict[str, Any], *, on_head: Any = None
        ) -> tuple[int, bytes, str]: ...


from helm_nemo.kube.errors import KubeApiError, api_error

PAGE_SIZE = 500
# Pages of one list on the wire at once (each on its own connection): enough to keep the server busy while
# the client reads and decodes, without a burst of requests on a list of many pages.
LOOKAHEAD = 4
# An answer at least this big is decoded with the garbage collector paused and then frozen (`decode`).
BIG_ANSWER = 1 << 20


def list_all(
    request: Request,
    path: str,
    query: dict[str, Any] | None = None,
    limit: int = PAGE_SIZE,
    *,
    managed_fields: bool = True,
) -> list[dict[str, Any]]:
    """Every item of a collection, page by page (`limit` + `continue`), in the server's order. Each page is
    read in a thread of its own, which asks for the next one as soon as the continue token has arrived;
    the pages are decoded here, one after another, as they arrive whole. `managed_fields=False`: the items
    come without metadata.managedFields, which are then not decoded at all (`without_managed_fields`)."""
    params = dict(query or {})
    if limit:
        params["limit"] = str(limit)
    window = threading.BoundedSemaphore(LOOKAHEAD)
    page: _Page | None = _Page(request, path, params, window, chain=bool(limit))
    items: list[dict[str, Any]] = []
    while page is not None:
        status, data = page.answer()
        if status >= 400:
            raise api_error(status, data, "GET", path)
        try:
            decoded = decode(data) if managed_fields else decode_without_managed_fields(data)
        except ValueError:
            raise KubeApiError(status, "BadResponse", f"the answer is not JSON: {data[:200]!r}", "GET", path) from None
        items.extend(decoded.get("items") or [])
        token = (decoded.get("metadata") or {}).get("continue") if limit else None
        page = page.following(token) if token else None
    return items


class _Page:
    """One page's GET, in a thread that waits for a place in the window. With `chain`, the head of its
    answer starts the next page (`following` returns it, or asks anew if the head held no token)."""

    def __init__(
        self, request: Request, path: str, params: dict[str, Any], window: threading.BoundedSemaphore, chain: bool
    ) -> None:
        self.request, self.path, self.params, self.window, self.chain = request, path, params, window, chain
        self.next: _Page | None = None
        self.next_token: str | None = None
        self.result: tuple[int, bytes] | None = None
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            with self.window:
                status, data, _ = self.request(
                    "GET", self.path, self.params, on_head=self._head if self.chain else None
                )
            self.result = status, data
        except BaseException as err:  # raised in the caller's thread
            self.error = err
        finally:
            self.done.set()

    def _head(self, head: bytes) -> None:
        token = _continue_token(head)
        if token:
            self.next_token = token
            self.next = _Page(self.request, self.path, {**self.params, "continue": token}, self.window, True)

    def answer(self) -> tuple[int, bytes]:
        self.done.wait()
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result

    def following(self, token: str) -> _Page:
        """The next page: the one its head started, or (the head did not hold the token) asked for now."""
        if self.next is not None and self.next_token == token:
            return self.next
        return _Page(self.request, self.path, {**self.params, "continue": token}, self.window, True)


_GC_LOCK = threading.Lock()
_GC_PAUSES = [0, False]  # decodes under way with the collector paused; whether it was enabled before


def decode(data: bytes) -> Any:
    """json.loads. An answer of BIG_ANSWER bytes or more (a page of pods, the node list) is decoded with
    the cyclic garbage collector paused, and the objects it made are then frozen (gc.freeze: moved out of
    the generations every collection walks). Decoding makes a dict or list for each JSON object or array
    (a pod with its managedFields: ~300), and each collection those allocations set off walks every
    container decoded before: 33 MB of pods (10 pages) took 0.9-1.2 s to decode with the collector, 0.3 s
    without. Pausing alone only moves that cost: the first full collection afterwards walks them all
    (the checks' allocations then took 2 s instead of 0.2). What is decoded here is kept until the command
    ends (the preflight's facts, status's pods); frozen objects are still freed when nothing refers to
    them (reference counting), only cycles among them would wait for the process's end."""
    if len(data) < BIG_ANSWER:
        return json.loads(data)
    import gc

    with _GC_LOCK:
        if not _GC_PAUSES[0]:
            _GC_PAUSES[1] = gc.isenabled()
            gc.disable()
        _GC_PAUSES[0] += 1
    try:
        return json.loads(data)
    finally:
        with _GC_LOCK:
            _GC_PAUSES[0] -= 1
            if not _GC_PAUSES[0]:
                gc.freeze()
                if _GC_PAUSES[1]:
                    gc.enable()


def decode_without_managed_fields(data: bytes) -> Any:
    """A list decoded with its items' metadata.managedFields left out: half the bytes of a pod or node as
    the API server sends them (the field managers' records; no check reads them), and more than half of
    the objects decoding makes. Cut from the bytes before decoding (`without_managed_fields`); an answer
    that does not decode once cut is decoded whole, and its managedFields dropped afterwards."""
    cut = without_managed_fields(data)
    if cut is not data:
        try:
            return decode(cut)
        except ValueError:
            pass
    answer = decode(data)
    for item in answer.get("items") or [] if isinstance(answer, dict) else []:
        if isinstance(item, dict) and isinstance(item.get("metadata"), dict):
            item["metadata"].pop("managedFields", None)
    return answer


_FIELDS = b',"managedFields":['
_FIELDS_END = b']},"'  # the array's end, then the metadata's: managedFields is ObjectMeta's last field


def without_managed_fields(data: bytes) -> bytes:
    """The answer's bytes with each `,"managedFields":[...]` cut out, or `data` itself where any one of them
    is not plainly cut. The API server writes ObjectMeta's fields in their Go order, managedFields last,
    and a managedFields entry holds strings and objects only (fieldsV1 is objects keyed by strings), so the
    first `]` after the array opens ends it, followed by the metadata's `}` and the item's next key. A
    managedFields whose first `]` is not so followed (a `]` inside one of its strings), or that would run
    into another item's metadata, is not cut: the whole answer is then decoded (the caller's fallback)."""
    pieces, start = [], 0
    while True:
        opened = data.find(_FIELDS, start)
        if opened < 0:
            break
        closed = data.find(b"]", opened + len(_FIELDS))
        if closed < 0 or not data.startswith(_FIELDS_END, closed) or data.find(b'"metadata"', opened, closed) >= 0:
            return data
        pieces.append(data[start:opened])
        start = closed + 1  # from the metadata's closing brace
    if not pieces:
        return data
    pieces.append(data[start:])
    return b"".join(pieces)


_CONTINUE = None


def _continue_token(data: bytes) -> str | None:
    """The list's metadata.continue, read from the first 4 KiB of the answer (None: not there)."""
    global _CONTINUE
    if _CONTINUE is None:
        import re

        _CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]*)"')
    head = data[:4096]
    items = head.find(b'"items"')
    found = _CONTINUE.search(head, 0, items if items >= 0 else len(head))
    return found.group(1).decode() if found else None
