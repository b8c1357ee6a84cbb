"""LIST page by page, and big answers decoded with the garbage collector out of the way.

A collection is asked for `limit` items at a time; the next page is asked for (on another connection) while
this one is parsed, its continue token read from the head of the answer. Decoding a page of pods makes a dict
or list for every JSON object and array: `decode` pauses the cyclic collector for a big answer and freezes what
it made.
"""

from __future__ import annotations

import json
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    # KubeClient.request: (method, path, query) -> (status, body, content type)
    Request = Callable[[str, str, dict[str, Any]], tuple[int, bytes, str]]

from helm_nemo.kube.errors import KubeApiError, api_error

PAGE_SIZE = 500
# An answer at least this big is decoded with the garbage collector paused and then frozen (`decode`).
BIG_ANSWER = 1 << 20


def list_all(
    request: Request, path: str, query: dict[str, Any] | None = None, limit: int = PAGE_SIZE
) -> list[dict[str, Any]]:
    """Every item of a collection, page by page (`limit` + `continue`). The next page is asked for (on
    another connection) while this one is parsed: its continue token sits in the list's metadata,
    which the API server writes before the items, so it is read from the head of the answer."""
    items: list[dict[str, Any]] = []
    params = dict(query or {})
    if limit:
        params["limit"] = str(limit)
    fetched: dict[str, Any] = {}

    def fetch(into: dict[str, Any], page_params: dict[str, Any]) -> None:
        try:
            into["answer"] = request("GET", path, page_params)
        except BaseException as err:  # raised in the caller's thread
            into["error"] = err

    fetch(fetched, dict(params))
    while True:
        if "error" in fetched:
            raise fetched["error"]
        status, data, _ = fetched["answer"]
        if status >= 400:
            raise api_error(status, data, "GET", path)
        token = _continue_token(data) if limit else None
        following: dict[str, Any] = {}
        thread: threading.Thread | None = None
        if token:
            params["continue"] = token
            thread = threading.Thread(target=fetch, args=(following, dict(params)), daemon=True)
            thread.start()
        try:
            page = decode(data)
        except ValueError:
            raise KubeApiError(status, "BadResponse", f"the answer is not JSON: {data[:200]!r}", "GET", path) from None
        items.extend(page.get("items") or [])
        real = (page.get("metadata") or {}).get("continue")
        if thread is None:
            if not real or not limit:
                return items
            params["continue"] = real  # not found in the head: asked now
            fetch(following, dict(params))
        else:
            thread.join()
            if real != token:  # pragma: no cover - a head that lied: ask again with the real token
                params["continue"] = real
                following = {}
                fetch(following, dict(params))
        fetched = following


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
