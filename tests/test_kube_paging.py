"""helm_nemo.kube.paging: the next page asked for while this one is still on the wire (a loopback stub server
that holds each page's tail: a fault no real API server can be made to do), the window of pages in flight,
and lists decoded without metadata.managedFields (the byte cut, its refusals and its fallback)."""

from __future__ import annotations

import gzip
import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from helm_nemo.kube import paging
from helm_nemo.kube.config import ClusterConfig
from helm_nemo.kube.client import KubeClient

PAGES = 6
PER_PAGE = 200


def pod(index: int, manager: str = "kubelet") -> dict:
    """A pod as the API server writes one: ObjectMeta's fields in Go order, managedFields last."""
    return {
        "metadata": {
            "name": f"p-{index:04d}",
            "namespace": "ml",
            "uid": random.Random(index).randbytes(256).hex(),  # what gzip cannot shrink: a page is many pieces
            "labels": {"app": "x"},
            "managedFields": [
                {
                    "manager": manager,
                    "operation": "Update",
                    "apiVersion": "v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {".": {}}}}},
                    "subresource": "status",
                }
            ],
        },
        "spec": {"nodeName": f"n-{index % 7}", "containers": [{"name": "c", "args": ["a", "b"]}]},
        "status": {"phase": "Running"},
    }


def compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()  # as Go's encoding/json writes it


class StubServer:
    """Serves PAGES pages of PER_PAGE pods, gzipped. Each page sends its first bytes, then holds the rest
    for `hold` seconds or until the next page has been asked for (`release_on_next`); it records when each
    request came and how many were in flight at once."""

    def __init__(self, hold: float, release_on_next: bool):
        self.hold, self.release_on_next = hold, release_on_next
        self.asked: dict[int, threading.Event] = {n: threading.Event() for n in range(PAGES + 1)}
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = 0
        self.held_until_next: list[bool] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                number = int(query["continue"][0]) if "continue" in query else 0
                server.serve(self, number)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def serve(self, handler: BaseHTTPRequestHandler, number: int) -> None:
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.asked[number].set()
        first = number * PER_PAGE
        meta = {"resourceVersion": "7"} | ({"continue": str(number + 1)} if number + 1 < PAGES else {})
        page = {"kind": "PodList", "apiVersion": "v1", "metadata": meta}
        page["items"] = [pod(i) for i in range(first, first + PER_PAGE)]
        body = gzip.compress(compact(page), compresslevel=1)
        assert len(body) > 4 * 8192
        handler.send_response(200)
        for name, value in (("Content-Type", "application/json"), ("Content-Encoding", "gzip")):
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body[:8192])
        handler.wfile.flush()
        if self.release_on_next and number + 1 < PAGES:
            self.held_until_next.append(self.asked[number + 1].wait(10))
        else:
            time.sleep(self.hold)
        handler.wfile.write(body[8192:])
        with self.lock:
            self.in_flight -= 1

    def stop(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def stub():
    servers = []

    def make(**kwargs):
        servers.append(StubServer(**kwargs))
        client = KubeClient(ClusterConfig(server=servers[-1].url, namespace="ml"))
        return servers[-1], client

    yield make
    for server in servers:
        server.stop()


def test_the_next_page_is_asked_for_while_this_one_is_on_the_wire(stub):
    server, client = stub(hold=0, release_on_next=True)
    items = client.list("/api/v1/pods")
    # Each page's tail was held until the next page was asked for: asked from the head, not after the end.
    assert server.held_until_next == [True] * (PAGES - 1)
    assert [p["metadata"]["name"] for p in items] == [f"p-{i:04d}" for i in range(PAGES * PER_PAGE)]


def test_at_most_lookahead_pages_are_in_flight(stub, monkeypatch):
    monkeypatch.setattr(paging, "LOOKAHEAD", 3)
    server, client = stub(hold=0.3, release_on_next=False)
    items = client.list("/api/v1/pods", managed_fields=False)
    assert len(items) == PAGES * PER_PAGE and "managedFields" not in items[-1]["metadata"]
    assert 2 <= server.most_in_flight <= 3, server.most_in_flight


def items_of(data: bytes) -> list[dict]:
    return json.loads(data)["items"]


def dropped(items: list[dict]) -> list[dict]:
    for item in items:
        item["metadata"].pop("managedFields", None)
    return items


def test_managed_fields_are_cut_from_the_bytes():
    data = compact({"kind": "PodList", "metadata": {}, "items": [pod(i) for i in range(5)]})
    cut = paging.without_managed_fields(data)
    assert b"managedFields" not in cut and b"fieldsV1" not in cut
    assert items_of(cut) == dropped(items_of(data))
    assert paging.decode_without_managed_fields(data)["items"] == dropped(items_of(data))


@pytest.mark.parametrize(
    "change, cut",
    [
        # a `]` inside one of its strings: the first `]` is not the array's end, nothing is cut
        (lambda meta: meta["managedFields"][0].update(manager="kubectl]x"), False),
        # managedFields not ObjectMeta's last field (not the API server's order): nothing is cut
        (lambda meta: meta.update(zone="a"), False),
        # a field manager's name made to end like the array: cut, but what is left is no JSON; decoded whole
        (lambda meta: meta["managedFields"][0].update(manager="x]},"), True),
    ],
    ids=["bracket-in-a-string", "not-last", "end-in-a-manager-name"],
)
def test_what_is_not_plainly_cut_is_decoded_whole(change, cut):
    items = [pod(i) for i in range(5)]
    change(items[2]["metadata"])
    data = compact({"kind": "PodList", "metadata": {}, "items": items})
    assert (paging.without_managed_fields(data) is not data) == cut
    assert paging.decode_without_managed_fields(data)["items"] == dropped(items_of(data))


def test_an_answer_without_managed_fields_is_left_as_it_is():
    data = compact({"kind": "PodList", "metadata": {}, "items": dropped([pod(i) for i in range(3)])})
    assert paging.without_managed_fields(data) is data
