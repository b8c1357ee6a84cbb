"""The data-prep worker (generator/data-prep/files/prepare.sh) run for real: bash, curl, zstd and gzip against
a loopback HTTP server serving small shards, with a stand-in tokenizer. The shard lists it reads are made by
helm_nemo.dataprep.shards from chart values, and its outputs must be where training reads them
(shards.output_prefixes). docs/data-prep.md is the contract."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helm_nemo.dataprep import shards

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "generator" / "data-prep" / "files" / "prepare.sh"
PROGRESS = re.compile(r"^helm-nemo data-prep: shard (\S+) (done|skipped|failed)\b")
HAVE_ZSTD = shutil.which("zstd") is not None
needs_zstd = pytest.mark.skipif(not HAVE_ZSTD, reason="zstd is not installed (scripts/setup.sh installs it)")

# The stand-in tokenizer: "$1" INPUT.jsonl, "$2" OUTPUT_PREFIX; writes PREFIX_<key>_document.bin (the input's
# bytes) and .idx (its line count) for every key, logs its call; FAIL_SHARD=<prefix name> writes half a .bin
# and fails, as a tokenizer killed midway.
TOKENIZER = r"""#!/bin/bash
set -euo pipefail
printf '%s\n' "${2##*/}" >>"$TOKENIZER_LOG"
for key in $DATA_PREP_JSON_KEYS; do
  if [[ ${FAIL_SHARD:-} == "${2##*/}" ]]; then
    head -c 5 "$1" >"$2_${key}_document.bin"
    exit 7
  fi
  cat "$1" >"$2_${key}_document.bin"
  wc -l <"$1" >"$2_${key}_document.idx"
done
"""


def jsonl(tag: str, lines: int = 3) -> bytes:
    return "".join(json.dumps({"text": f"{tag} document {i}", "id": i}) + "\n" for i in range(lines)).encode()


def zst(data: bytes) -> bytes:
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Server:
    """Files by URL path; `fail[path] = n` answers 503 to the next n requests of that path; `cut[path] = [n, ...]`
    ends the next responses of that path after n bytes of their body (the connection closed, as a pod killed or
    a network cut). Range requests (`bytes=N-`) get a 206 from N, or a 416 when N is past the end, unless
    `ranges` is False (then the whole file, with a 200, as a server that does not do ranges). Each file has a
    strong ETag (its sha256) and an If-Range that does not match it gets the whole file. `ranges_asked` lists
    (path, Range, If-Range) of every request that had a Range header."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.fail: dict[str, int] = {}
        self.cut: dict[str, list[int]] = {}
        self.ranges = True
        self.requests: list[str] = []
        self.queries: list[str] = []
        self.ranges_asked: list[tuple[str, str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]  # a query is part of the URL, not of the file
                server.requests.append(path)
                server.queries.append(self.path)
                if server.fail.get(path, 0) > 0:
                    server.fail[path] -= 1
                    self.send_error(503, "busy")
                    return
                if path not in server.files:
                    self.send_error(404)
                    return
                body = server.files[path]
                etag = f'"{sha(body)}"'
                asked, if_range = self.headers.get("Range"), self.headers.get("If-Range")
                start = 0
                if asked is not None:
                    server.ranges_asked.append((path, asked, if_range))
                    hit = re.fullmatch(r"bytes=(\d+)-", asked)
                    assert hit, asked  # the worker asks for the rest of the file only
                    if server.ranges and (if_range is None or if_range == etag):
                        start = int(hit.group(1))
                        if start >= len(body):
                            self.send_response(416)
                            self.send_header("Content-Range", f"bytes */{len(body)}")
                            self.send_header("Content-Length", "0")
                            self.end_headers()
                            return
                if start:
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.send_header("ETag", etag)
                self.end_headers()
                cuts = server.cut.get(path)
                if cuts:
                    self.wfile.write(body[start : start + cuts.pop(0)])
                    self.close_connection = True
                    return
                self.wfile.write(body[start:])

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def count(self, path: str) -> int:
        return self.requests.count(path)

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = Server()
    try:
        yield s
    finally:
        s.stop()


class Worker:
    """One data-prep setup: values -> shards.tsv/downloads.tsv (shards.expand), an output folder, the tokenizer."""

    def __init__(self, tmp: Path, values: dict) -> None:
        self.tmp = tmp
        self.values = values
        self.output = Path(values["output"]["path"])
        self.log = tmp / "tokenizer.log"
        self.tokenizer = tmp / "tokenize.sh"
        self.tokenizer.write_text(TOKENIZER)
        self.tokenizer.chmod(0o755)
        self.shards = tmp / "shards.tsv"
        self.shards.write_text("".join(f"{s.name}\t{s.source}\t{s.sha256 or ''}\n" for s in shards.expand(values)))
        self.downloads = tmp / "downloads.tsv"
        self.downloads.write_text(
            "".join(f"{d['path']}\t{d['url']}\t{d.get('sha256') or ''}\n" for d in values.get("downloads") or [])
        )

    def run(self, index: int, workers: int, **env: str) -> subprocess.CompletedProcess:
        full = {
            "PATH": os.environ["PATH"],
            "DATA_PREP_INDEX": str(index),
            "DATA_PREP_WORKERS": str(workers),
            "DATA_PREP_SHARDS": str(self.shards),
            "DATA_PREP_DOWNLOADS": str(self.downloads),
            "DATA_PREP_OUTPUT": str(self.output),
            "DATA_PREP_JSON_KEYS": " ".join(shards.json_keys(self.values)),
            "DATA_PREP_TOKENIZE": str(self.tokenizer),
            "DATA_PREP_RETRY_DELAY": "0",
            "TOKENIZER_LOG": str(self.log),
            **env,
        }
        return subprocess.run(["bash", str(WORKER)], env=full, capture_output=True, text=True, timeout=120)

    def calls(self) -> list[str]:
        return self.log.read_text().split() if self.log.exists() else []

    def outputs(self) -> list[str]:
        return sorted(p.name for p in self.output.iterdir() if p.is_file())


def progress(result: subprocess.CompletedProcess) -> dict[str, str]:
    """shard name -> done/skipped/failed, from the worker's stdout lines (the contract's regex)."""
    found = {}
    for line in result.stdout.splitlines():
        hit = PROGRESS.match(line)
        if hit:
            found[hit.group(1)] = hit.group(2)
    return found


def test_bash_parses_the_worker():
    subprocess.run(["bash", "-n", str(WORKER)], check=True)
    text = WORKER.read_text()
    assert text.startswith("#!/bin/bash\n") and "set -euo pipefail" in text
    assert "eval" not in text  # names and URLs are data


@needs_zstd
def test_three_workers_prepare_every_shard_once_where_training_reads_it(server, tmp_path):
    local = tmp_path / "corpus" / "local.jsonl.zst"  # a source on mounted storage, read in place
    local.parent.mkdir()
    local.write_bytes(zst(jsonl("local")))
    data = {}
    for n in range(5):
        data[f"{n:03d}"] = jsonl(f"pattern {n}", lines=n + 1)
        server.files[f"/train/{n:03d}.jsonl.zst"] = zst(data[f"{n:03d}"])
    data["wiki"] = jsonl("wiki")
    server.files["/wiki.jsonl.gz"] = gzip.compress(data["wiki"])
    data["books"] = jsonl("books")
    server.files["/books/part-1.jsonl"] = data["books"]
    data["local"] = jsonl("local")
    values = {
        "workers": 3,
        "shards": {
            "urlPattern": server.url + "/train/{index}.jsonl.zst",
            "indexWidth": 3,
            "numbers": "0-1,2-4",
            "files": [
                {"url": server.url + "/wiki.jsonl.gz"},
                {"url": server.url + "/books/part-1.jsonl", "name": "books"},
                {"url": str(local)},
            ],
        },
        "output": {"path": str(tmp_path / "out")},
    }
    w = Worker(tmp_path, values)
    every = shards.expand(values)
    assert [s.name for s in every] == ["000", "001", "002", "003", "004", "wiki", "books", "local"]
    for index in range(3):
        result = w.run(index, 3)
        assert result.returncode == 0, result.stdout + result.stderr
        mine = [s.name for s in shards.assignment(every, 3, index)]
        lines = result.stdout.splitlines()
        assert lines[0] == f"helm-nemo data-prep: worker {index}/3 shards {len(mine)}"
        assert progress(result) == dict.fromkeys(mine, "done")
        assert lines[-1] == f"helm-nemo data-prep: worker {index}/3 finished: {len(mine)} shards, 0 skipped"
        assert w.calls()[-len(mine) :] == mine  # this worker's shards, in shard order
    assert sorted(w.calls()) == sorted(s.name for s in every)  # each shard tokenized exactly once
    for prefix in shards.output_prefixes(values):
        name = Path(prefix).name.removesuffix("_text_document")
        assert Path(prefix + ".bin").read_bytes() == data[name]  # extracted as the tokenizer's input
        assert Path(prefix + ".idx").read_text().strip() == str(data[name].count(b"\n"))
    assert w.outputs() == sorted(Path(p).name + s for p in shards.output_prefixes(values) for s in (".bin", ".idx"))
    # nothing left in the work folder (downloads and extracted files removed); the source read in place stays
    assert list((w.output / ".helm-nemo" / "work").iterdir()) == []
    assert local.exists()
    marker = (w.output / ".helm-nemo" / "wiki.done").read_text().splitlines()
    assert sorted(marker) == sorted(
        f"{(w.output / f).stat().st_size}\t{f}" for f in ("wiki_text_document.bin", "wiki_text_document.idx")
    )


def test_done_line_says_size_and_time(server, tmp_path):
    server.files["/a.jsonl"] = jsonl("a", lines=40)
    w = Worker(
        tmp_path, {"shards": {"files": [{"url": server.url + "/a.jsonl"}]}, "output": {"path": str(tmp_path / "o")}}
    )
    result = w.run(0, 1)
    assert result.returncode == 0, result.stderr
    size = sum(p.stat().st_size for p in (tmp_path / "o").glob("a_text_document.*"))
    assert size >= 1024
    assert re.search(
        rf"^helm-nemo data-prep: shard a done \({size * 10 // 1024 // 10}\.{size * 10 // 1024 % 10} KiB in \d+s\)$",
        result.stdout,
        re.M,
    ), result.stdout


def test_several_json_keys_each_get_their_outputs(server, tmp_path):
    server.files["/a.jsonl.gz"] = gzip.compress(jsonl("a"))
    values = {
        "shards": {"files": [{"url": server.url + "/a.jsonl.gz"}]},
        "tokenizer": {"jsonKeys": ["text", "code"]},
        "output": {"path": str(tmp_path / "o")},
    }
    w = Worker(tmp_path, values)
    assert w.run(0, 1).returncode == 0
    assert shards.output_prefixes(values) == [f"{tmp_path}/o/a_text_document", f"{tmp_path}/o/a_code_document"]
    for prefix in shards.output_prefixes(values):
        assert Path(prefix + ".bin").exists() and Path(prefix + ".idx").exists()
    # a marker written for other keys does not make the shard complete for these
    w2 = Worker(tmp_path, {**values, "tokenizer": {"jsonKeys": ["text", "code", "title"]}})
    assert progress(w2.run(0, 1)) == {"a": "done"}


def test_retries_after_503(server, tmp_path):
    server.files["/a.jsonl"] = jsonl("a")
    server.fail["/a.jsonl"] = 2
    w = Worker(
        tmp_path, {"shards": {"files": [{"url": server.url + "/a.jsonl"}]}, "output": {"path": str(tmp_path / "o")}}
    )
    result = w.run(0, 1, DATA_PREP_RETRIES="2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.count("/a.jsonl") == 3
    assert progress(result) == {"a": "done"}
    assert "shard a download: attempt 2 of 3 failed (HTTP 503), retrying in 0s" in result.stderr
    assert (tmp_path / "o" / "a_text_document.bin").read_bytes() == jsonl("a")


def test_too_many_503s_fail_the_shard_after_the_retries(server, tmp_path):
    server.files["/a.jsonl"] = jsonl("a")
    server.fail["/a.jsonl"] = 5
    server.files["/b.jsonl"] = jsonl("b")
    files = [{"url": server.url + "/a.jsonl"}, {"url": server.url + "/b.jsonl"}]
    w = Worker(tmp_path, {"shards": {"files": files}, "output": {"path": str(tmp_path / "o")}})
    result = w.run(0, 1, DATA_PREP_RETRIES="1")
    assert result.returncode == 1
    assert server.count("/a.jsonl") == 2
    assert progress(result) == {"a": "failed", "b": "done"}
    assert "shard a failed: download: HTTP 503 after 2 attempts" in result.stdout
    assert result.stdout.splitlines()[-1] == "helm-nemo data-prep: worker 0/1 finished: 2 shards, 0 skipped, 1 failed"
    assert not list((tmp_path / "o" / ".helm-nemo" / "work").iterdir())  # no .part left


BIG = jsonl("big", lines=4000)  # 200 KB: cut at 100000 bytes, "97.6 KiB"


def one_shard(server: Server, tmp_path: Path, body: bytes = BIG, checksum: bool = True) -> Worker:
    """A worker of one shard, /big.jsonl, served with `body`, its sha256 in the shard list unless `checksum` is
    False."""
    server.files["/big.jsonl"] = body
    shard = {"url": server.url + "/big.jsonl", **({"sha256": sha(body)} if checksum else {})}
    return Worker(tmp_path, {"shards": {"files": [shard]}, "output": {"path": str(tmp_path / "o")}})


def part_of(w: Worker) -> Path:
    return w.output / ".helm-nemo" / "work" / "big.jsonl.part"


def test_a_download_cut_midway_resumes_where_it_stopped(server, tmp_path):
    w = one_shard(server, tmp_path)
    server.cut["/big.jsonl"] = [100000]
    result = w.run(0, 1, DATA_PREP_RETRIES="2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "shard big download: attempt 1 of 3 failed (curl exit 18: " in result.stderr
    assert "helm-nemo data-prep: shard big download: resuming at 97.6 KiB\n" in result.stderr
    # the second request asks for the rest only, If-Range the first response's ETag
    assert server.count("/big.jsonl") == 2
    assert server.ranges_asked == [("/big.jsonl", "bytes=100000-", f'"{sha(BIG)}"')]
    assert progress(result) == {"big": "done"}  # the sha256 matched
    assert (w.output / "big_text_document.bin").read_bytes() == BIG
    assert list((w.output / ".helm-nemo" / "work").iterdir()) == []  # no .part, no .headers left


def test_the_next_run_resumes_the_part_the_first_left(server, tmp_path):
    w = one_shard(server, tmp_path)
    server.cut["/big.jsonl"] = [100000]
    first = w.run(0, 1, DATA_PREP_RETRIES="0")
    assert first.returncode == 1
    assert "shard big failed: download: curl exit 18: " in first.stdout
    assert "(97.6 KiB kept to resume)" in first.stdout
    assert part_of(w).read_bytes() == BIG[:100000]
    second = w.run(0, 1, DATA_PREP_RETRIES="0")  # the Job's next pod
    assert second.returncode == 0, second.stdout + second.stderr
    assert "shard big download: resuming at 97.6 KiB" in second.stderr
    assert server.ranges_asked == [("/big.jsonl", "bytes=100000-", f'"{sha(BIG)}"')]
    assert (w.output / "big_text_document.bin").read_bytes() == BIG
    assert list((w.output / ".helm-nemo" / "work").iterdir()) == []


def test_a_part_left_by_a_killed_pod_is_continued(server, tmp_path):
    w = one_shard(server, tmp_path)
    part_of(w).parent.mkdir(parents=True)
    part_of(w).write_bytes(BIG[:12345])  # killed mid-transfer, before anything else was written
    result = w.run(0, 1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.ranges_asked == [("/big.jsonl", "bytes=12345-", None)]  # no headers kept: no If-Range
    assert server.count("/big.jsonl") == 1
    assert (w.output / "big_text_document.bin").read_bytes() == BIG


def test_a_server_without_ranges_restarts_from_zero(server, tmp_path):
    w = one_shard(server, tmp_path)
    server.ranges = False
    server.cut["/big.jsonl"] = [100000]
    result = w.run(0, 1, DATA_PREP_RETRIES="1")  # the restart from zero is not counted as an attempt
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.ranges_asked == [("/big.jsonl", "bytes=100000-", f'"{sha(BIG)}"')]
    assert server.count("/big.jsonl") == 3  # cut, the whole file refused (curl appends nothing), from zero
    assert "shard big download: the server did not continue at 97.6 KiB (curl exit 33: " in result.stderr
    assert "restarting from zero" in result.stderr
    assert progress(result) == {"big": "done"}
    assert (w.output / "big_text_document.bin").read_bytes() == BIG


def test_a_file_changed_on_the_server_is_fetched_whole(server, tmp_path):
    old = BIG
    w = one_shard(server, tmp_path, checksum=False)
    server.cut["/big.jsonl"] = [100000]
    assert w.run(0, 1, DATA_PREP_RETRIES="0").returncode == 1
    new = jsonl("changed", lines=4000)
    server.files["/big.jsonl"] = new
    result = w.run(0, 1, DATA_PREP_RETRIES="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.ranges_asked == [("/big.jsonl", "bytes=100000-", f'"{sha(old)}"')]  # not the new file's
    assert "restarting from zero" in result.stderr
    assert (w.output / "big_text_document.bin").read_bytes() == new


@pytest.mark.parametrize("extra", [b"", b"more"])
def test_a_range_not_satisfiable_restarts_from_zero(server, tmp_path, extra):
    w = one_shard(server, tmp_path)
    part_of(w).parent.mkdir(parents=True)
    part_of(w).write_bytes(BIG + extra)  # whole (killed before the rename) or longer than the file
    result = w.run(0, 1, DATA_PREP_RETRIES="0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.ranges_asked == [("/big.jsonl", f"bytes={len(BIG) + len(extra)}-", None)]
    assert server.count("/big.jsonl") == 2
    assert "(HTTP 416), restarting from zero" in result.stderr
    assert (w.output / "big_text_document.bin").read_bytes() == BIG


def test_a_resumed_download_is_checked_like_any_other(server, tmp_path):
    w = one_shard(server, tmp_path)
    part_of(w).parent.mkdir(parents=True)
    part_of(w).write_bytes(b"x" * 100)  # not the file's first bytes
    result = w.run(0, 1)
    assert result.returncode == 1
    assert server.ranges_asked == [("/big.jsonl", "bytes=100-", None)]
    assert "shard big failed: sha256 mismatch" in result.stdout
    assert list((w.output / ".helm-nemo" / "work").iterdir()) == []  # removed: the next run starts from zero
    again = w.run(0, 1)
    assert again.returncode == 0 and len(server.ranges_asked) == 1
    assert (w.output / "big_text_document.bin").read_bytes() == BIG


def test_a_404_is_not_retried(server, tmp_path):
    w = Worker(
        tmp_path, {"shards": {"files": [{"url": server.url + "/gone.jsonl"}]}, "output": {"path": str(tmp_path / "o")}}
    )
    result = w.run(0, 1, DATA_PREP_RETRIES="4")
    assert result.returncode == 1 and server.count("/gone.jsonl") == 1
    assert "shard gone failed: download: HTTP 404" in result.stdout


def test_checksum_mismatch_is_refused_and_the_other_shards_are_done(server, tmp_path):
    server.files["/good.jsonl.gz"] = gzip.compress(jsonl("good"))
    server.files["/bad.jsonl.gz"] = gzip.compress(jsonl("bad"))
    wrong = sha(b"something else")
    files = [
        {"url": server.url + "/bad.jsonl.gz", "sha256": wrong},
        {"url": server.url + "/good.jsonl.gz", "sha256": sha(server.files["/good.jsonl.gz"]).upper()},
    ]
    w = Worker(tmp_path, {"shards": {"files": files}, "output": {"path": str(tmp_path / "o")}})
    result = w.run(0, 1)
    assert result.returncode == 1
    assert progress(result) == {"bad": "failed", "good": "done"}
    got = sha(server.files["/bad.jsonl.gz"])
    assert f"shard bad failed: sha256 mismatch (expected {wrong[:12]}..., got {got[:12]}...)" in result.stdout
    assert w.calls() == ["good"]  # nothing tokenized for the bad one
    assert w.outputs() == ["good_text_document.bin", "good_text_document.idx"]
    assert sorted(p.name for p in (tmp_path / "o" / ".helm-nemo").iterdir()) == ["good.done", "work"]
    assert not list((tmp_path / "o" / ".helm-nemo" / "work").iterdir())  # the bad download is not kept


def test_resume_skips_finished_shards_and_redoes_a_damaged_one(server, tmp_path):
    for name in ("a", "b", "c"):
        server.files[f"/{name}.jsonl"] = jsonl(name)
    files = [{"url": f"{server.url}/{name}.jsonl"} for name in ("a", "b", "c")]
    w = Worker(tmp_path, {"shards": {"files": files}, "output": {"path": str(tmp_path / "o")}})
    assert w.run(0, 1).returncode == 0
    assert w.calls() == ["a", "b", "c"] and len(server.requests) == 3
    again = w.run(0, 1)
    assert again.returncode == 0
    assert progress(again) == {"a": "skipped", "b": "skipped", "c": "skipped"}
    assert "helm-nemo data-prep: shard a skipped (complete)" in again.stdout
    assert again.stdout.splitlines()[-1] == "helm-nemo data-prep: worker 0/1 finished: 3 shards, 3 skipped"
    assert w.calls() == ["a", "b", "c"] and len(server.requests) == 3  # no tokenizer call, no download
    # an output whose size differs from the marker's: that shard only is prepared again
    (tmp_path / "o" / "b_text_document.bin").write_bytes(b"truncated")
    third = w.run(0, 1)
    assert progress(third) == {"a": "skipped", "b": "done", "c": "skipped"}
    assert w.calls() == ["a", "b", "c", "b"]


def test_a_half_written_shard_leaves_no_outputs_and_no_marker(server, tmp_path):
    for name in ("a", "b"):
        server.files[f"/{name}.jsonl.gz"] = gzip.compress(jsonl(name))
    files = [{"url": f"{server.url}/{name}.jsonl.gz"} for name in ("a", "b")]
    w = Worker(tmp_path, {"shards": {"files": files}, "output": {"path": str(tmp_path / "o")}})
    result = w.run(0, 1, FAIL_SHARD="a")
    assert result.returncode == 1
    assert progress(result) == {"a": "failed", "b": "done"}
    assert "shard a failed: tokenizer exited with status 7" in result.stdout
    assert w.outputs() == ["b_text_document.bin", "b_text_document.idx"]
    assert not (tmp_path / "o" / ".helm-nemo" / "a.done").exists()
    # the whole download stays for the restart; no partial output or extracted file in the work folder
    assert sorted(p.name for p in (tmp_path / "o" / ".helm-nemo" / "work").iterdir()) == ["a.jsonl.gz"]
    # the restart (the Job's next pod of this index) does only the failed shard, without downloading it again
    before = len(server.requests)
    retry = w.run(0, 1)
    assert retry.returncode == 0 and progress(retry) == {"a": "done", "b": "skipped"}
    assert len(server.requests) == before
    assert (tmp_path / "o" / "a_text_document.bin").read_bytes() == jsonl("a")


def test_keep_downloads(server, tmp_path):
    server.files["/a.jsonl.gz"] = gzip.compress(jsonl("a"))
    w = Worker(
        tmp_path, {"shards": {"files": [{"url": server.url + "/a.jsonl.gz"}]}, "output": {"path": str(tmp_path / "o")}}
    )
    assert w.run(0, 1, DATA_PREP_KEEP_DOWNLOADS="true").returncode == 0
    assert sorted(p.name for p in (tmp_path / "o" / ".helm-nemo" / "work").iterdir()) == ["a.jsonl", "a.jsonl.gz"]


def test_extra_downloads_land_once_with_their_checksum(server, tmp_path):
    server.files["/gpt2/vocab.json"] = b'{"a": 0}'
    server.files["/gpt2/merges.txt"] = b"#version: 0.2\na b\n"
    bpe = tmp_path / "data" / "bpe"
    values = {
        "shards": {"files": [{"url": server.url + "/s.jsonl"}]},
        "downloads": [
            {"url": server.url + "/gpt2/vocab.json", "path": str(bpe / "vocab.json"), "sha256": sha(b'{"a": 0}')},
            {"url": server.url + "/gpt2/merges.txt", "path": str(bpe / "merges.txt")},
        ],
        "output": {"path": str(tmp_path / "o")},
    }
    server.files["/s.jsonl"] = jsonl("s")
    w = Worker(tmp_path, values)
    first = w.run(0, 2)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (bpe / "vocab.json").read_bytes() == b'{"a": 0}' and (bpe / "merges.txt").read_bytes().startswith(
        b"#version"
    )
    assert f"helm-nemo data-prep: download {bpe}/vocab.json done (8 B)" in first.stdout
    assert sorted(p.name for p in bpe.iterdir()) == ["merges.txt", "vocab.json"]  # no .part left
    second = w.run(1, 2)  # the other worker: the files are there (checksum matches): kept
    assert second.returncode == 0
    assert server.count("/gpt2/vocab.json") == 1 and server.count("/gpt2/merges.txt") == 1
    assert f"download {bpe}/vocab.json kept (present)" in second.stdout
    assert progress(second) == {}  # worker 1 of 2 has no shard of the one
    # a file whose checksum does not match is fetched again
    (bpe / "vocab.json").write_bytes(b"stale")
    assert w.run(1, 2).returncode == 0
    assert (bpe / "vocab.json").read_bytes() == b'{"a": 0}' and server.count("/gpt2/vocab.json") == 2


def test_an_extra_download_with_a_wrong_checksum_stops_the_worker(server, tmp_path):
    server.files["/vocab.json"] = b"{}"
    values = {
        "shards": {"files": [{"url": server.url + "/s.jsonl"}]},
        "downloads": [{"url": server.url + "/vocab.json", "path": str(tmp_path / "vocab.json"), "sha256": "0" * 64}],
        "output": {"path": str(tmp_path / "o")},
    }
    w = Worker(tmp_path, values)
    result = w.run(0, 1)
    assert result.returncode == 1
    assert f"download {tmp_path}/vocab.json failed: sha256 mismatch (expected 000000000000..., got" in result.stdout
    assert not (tmp_path / "vocab.json").exists() and not list(tmp_path.glob("vocab.json*"))
    assert w.calls() == []


def test_names_and_urls_are_data_never_code(server, tmp_path):
    marker = tmp_path / "pwned"
    server.files["/x.jsonl"] = jsonl("x")
    w = Worker(
        tmp_path, {"shards": {"files": [{"url": server.url + "/x.jsonl"}]}, "output": {"path": str(tmp_path / "o")}}
    )
    w.shards.write_text(
        f"$(touch {marker})\t{server.url}/x.jsonl\t\n"
        f"ok\t{server.url}/x.jsonl?q=$(touch${{IFS}}{marker})[1-2]{{a,b}}\t\n"
        f"../escape\t{server.url}/x.jsonl\t\n"
    )
    result = w.run(0, 1)
    assert result.returncode == 1
    assert not marker.exists()
    assert progress(result)["ok"] == "done"
    assert server.queries[-1].endswith("/x.jsonl?q=$(touch${IFS}" + str(marker) + ")[1-2]{a,b}")  # sent as written
    assert "shard ../escape failed: not a file name" in result.stdout
    assert not (tmp_path / "escape_text_document.bin").exists()


@pytest.mark.parametrize(
    "env, words",
    [
        ({"DATA_PREP_INDEX": "2", "DATA_PREP_WORKERS": "2"}, "DATA_PREP_INDEX must be 0..1"),
        ({"DATA_PREP_WORKERS": "0"}, "DATA_PREP_WORKERS must be"),
        ({"DATA_PREP_OUTPUT": "relative/out"}, "DATA_PREP_OUTPUT must be an absolute path"),
        ({"DATA_PREP_TOKENIZE": "/nonexistent/tokenize"}, "DATA_PREP_TOKENIZE names no executable"),
        ({"DATA_PREP_JSON_KEYS": "a/b"}, "JSON key 'a/b' cannot be part of a file name"),
        ({"DATA_PREP_KEEP_DOWNLOADS": "yes"}, "DATA_PREP_KEEP_DOWNLOADS must be true or false"),
    ],
)
def test_bad_environment_is_refused(tmp_path, env, words):
    w = Worker(tmp_path, {"shards": {}, "output": {"path": str(tmp_path / "o")}})
    result = w.run(0, 1, **env)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert w.calls() == []
