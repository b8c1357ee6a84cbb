"""The disk cache of parsed schemas (helm_nemo.validate.schema_cache): where it lives, that a hit gives
exactly the parsed JSON, that a changed source is a different entry, and that a corrupt, unreadable or
unwritable cache, or concurrent runs, change nothing but the speed."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helm_nemo.validate import schema_cache
from helm_nemo.validate.schema_cache import LazyDefs, cache_dir, load_defs, load_json

ROOT = Path(__file__).resolve().parent.parent
JOBSET = ROOT / "schemas/k8s/jobset.x-k8s.io/jobset_v1alpha2.json"
DEFS = {
    "$defs": {
        "a.B": {"type": "object", "properties": {"x": {"type": ["string", "null"], "enum": ["p", None]}}},
        "c.D": {"type": "integer", "format": "int64", "minimum": -1.5, "x-k": True},
        "e.F": {},
    }
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", str(folder))
    return folder


def entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.exists() else []


def no_json(monkeypatch):
    """From here on a parse of the source fails the test: what is returned comes from the cache."""

    def refuse(*_a, **_k):
        raise AssertionError("parsed the source instead of reading the cache")

    monkeypatch.setattr(schema_cache.json, "loads", refuse)


def test_cache_folder_precedence(monkeypatch, tmp_path):
    for name in ("HELM_NEMO_CACHE_DIR", "HELM_CACHE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home/.cache/helm-nemo"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: relative paths are ignored
    assert cache_dir() == tmp_path / "home/.cache/helm-nemo"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg/helm-nemo"
    monkeypatch.setenv("HELM_CACHE_HOME", str(tmp_path / "helm-cache"))  # set by helm for its plugins
    assert cache_dir() == tmp_path / "helm-cache/helm-nemo"
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", "")
    assert cache_dir() is None


def test_a_hit_is_the_parsed_json_without_parsing(cache, monkeypatch):
    expected = json.loads(JOBSET.read_bytes())
    assert load_json(JOBSET) == expected  # cold: parsed, and written
    (written,) = entries(cache)
    assert written.name.startswith("jobset_v1alpha2-doc-") and written.suffix == ".bin"
    no_json(monkeypatch)
    hit = load_json(JOBSET)
    assert hit == expected and json.dumps(hit) == json.dumps(expected)  # key order and number types too
    assert entries(cache) == [written]


def test_defs_are_unmarshalled_one_by_one(cache, tmp_path, monkeypatch):
    source = tmp_path / "_definitions.json"
    source.write_text(json.dumps(DEFS))
    assert dict(load_defs(source)) == DEFS["$defs"]
    no_json(monkeypatch)
    hit = load_defs(source)
    assert isinstance(hit, LazyDefs) and hit._loaded == {}
    assert "c.D" in hit and "nope" not in hit and len(hit) == 3 and list(hit) == list(DEFS["$defs"])
    assert hit["c.D"] == DEFS["$defs"]["c.D"] and list(hit._loaded) == ["c.D"]
    assert hit["c.D"] is hit["c.D"]
    assert dict(hit) == DEFS["$defs"]
    with pytest.raises(KeyError):
        hit["nope"]


def test_a_changed_source_is_a_new_entry(cache, tmp_path):
    source = tmp_path / "crd.json"
    source.write_text('{"a": 1}')
    assert load_json(source) == {"a": 1}
    source.write_text('{"a": 2}')  # same size, other content
    assert load_json(source) == {"a": 2}
    assert len(entries(cache)) == 2
    source.write_text('{"a": 1}')
    assert load_json(source) == {"a": 1}
    assert len(entries(cache)) == 2


def test_the_entry_name_holds_the_code_and_marshal_versions(cache, tmp_path, monkeypatch):
    source = tmp_path / "crd.json"
    source.write_text('{"a": 1}')
    load_json(source)
    monkeypatch.setattr(schema_cache, "FORMAT", schema_cache.FORMAT + 1)
    load_json(source)
    monkeypatch.setattr("helm_nemo.__version__", "99.0.0")
    load_json(source)
    names = [p.name for p in entries(cache)]
    assert len(names) == 3 and all(
        f"-m{marshal.version}-py{sys.version_info[0]}{sys.version_info[1]}.bin" in n for n in names
    )


def _corruptions(kind: str):
    magic = schema_cache._MAGIC
    wrong_type = marshal.dumps({"a.B": 1}) if kind == "defs" else marshal.dumps(7)
    out = {
        "empty": lambda raw: b"",
        "truncated": lambda raw: raw[: len(raw) // 2],
        "header only": lambda raw: raw[: len(magic) + 8],
        "flipped byte": lambda raw: raw[:-5] + bytes([raw[-5] ^ 0x40]) + raw[-4:],
        "other magic": lambda raw: b"X" + raw[1:],
        "garbage": lambda raw: os.urandom(300),
        "right checksum, not marshal": lambda raw: magic + _checked(b"\xff\xfe junk"),
        "right checksum, wrong type": lambda raw: magic + _checked(wrong_type),
    }
    if kind == "defs":  # an index whose entries point past the definitions
        out["right checksum, index beyond the data"] = lambda raw: (
            magic + _checked(marshal.dumps({name: (10**6, 9, 0) for name in DEFS["$defs"]}))
        )
    return out


def _checked(payload: bytes) -> bytes:
    import binascii

    return binascii.crc32(payload).to_bytes(4, "big") + len(payload).to_bytes(4, "big") + payload


CORRUPTIONS = [(kind, how) for kind in ("doc", "defs") for how in _corruptions(kind)]


@pytest.mark.parametrize("kind,how", CORRUPTIONS, ids=[f"{k}-{h}" for k, h in CORRUPTIONS])
def test_a_corrupt_entry_is_ignored_and_rewritten(cache, tmp_path, kind, how):
    source = tmp_path / "_definitions.json"
    source.write_text(json.dumps(DEFS))
    load = load_json if kind == "doc" else load_defs
    expected = DEFS if kind == "doc" else DEFS["$defs"]
    load(source)
    (entry,) = entries(cache)
    good = entry.read_bytes()
    entry.write_bytes(_corruptions(kind)[how](good))
    assert dict(load(source)) == expected  # (a `defs` entry: a definition found corrupt when read)
    assert entries(cache) == [entry] and entry.read_bytes() == good  # rewritten whole


def test_an_unreadable_or_unwritable_cache_changes_nothing(tmp_path, monkeypatch):
    source = tmp_path / "crd.json"
    source.write_text('{"a": [1, 2.5, null, true]}')
    expected = {"a": [1, 2.5, None, True]}
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", str(blocker / "cache"))  # mkdir fails (a file in the way)
    assert load_json(source) == expected
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", str(tmp_path / "cache"))
    load_json(source)
    (entry,) = entries(tmp_path / "cache")
    entry.unlink()
    entry.mkdir()  # the entry cannot be read (nor replaced)
    assert load_json(source) == expected
    assert entries(tmp_path / "cache") == [entry] and entry.is_dir()  # and no temporary file was left
    monkeypatch.setenv("HELM_NEMO_CACHE_DIR", "")  # off
    assert load_json(source) == expected


def test_a_failed_write_leaves_no_temporary_file(cache, tmp_path, monkeypatch):
    source = tmp_path / "crd.json"
    source.write_text('{"a": 1}')

    def full_disk(*_a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(schema_cache.os, "replace", full_disk)
    assert load_json(source) == {"a": 1}
    assert entries(cache) == []


def test_a_read_only_cache_folder_is_used_as_it_is(cache, tmp_path, monkeypatch):
    """Creating a file in the folder fails (EACCES, as for a read-only folder; chmod cannot show it to root,
    which CI runs as): existing entries are still read, new sources are parsed, nothing is said."""
    source = tmp_path / "crd.json"
    source.write_text('{"a": 1}')
    load_json(source)
    other = tmp_path / "other.json"
    other.write_text('{"b": 2}')
    real_open = schema_cache.os.open

    def read_only(path, flags, *args):
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(schema_cache.os, "open", read_only)
    assert load_json(other) == {"b": 2}  # cannot write: parsed, nothing said
    assert len(entries(cache)) == 1
    no_json(monkeypatch)
    assert load_json(source) == {"a": 1}  # still read from the cache


CONCURRENT = """
import json, sys
from pathlib import Path
from helm_nemo.validate.schema_cache import load_defs, load_json
source = Path(sys.argv[1])
for _ in range(5):
    assert dict(load_defs(source)) == json.loads(source.read_text())["$defs"]
    assert load_json(source) == json.loads(source.read_text())
print("ok")
"""


def test_concurrent_runs_on_an_empty_cache(cache, tmp_path):
    """Several processes fill one cache at once: each reads the right content, the entries end up whole,
    and no temporary file stays behind."""
    source = tmp_path / "_definitions.json"
    big = json.loads((ROOT / "schemas/k8s/kubeflow.org/pytorchjob_v1.json").read_text())
    source.write_text(json.dumps({"$defs": {**DEFS["$defs"], **{f"p{i}": big for i in range(4)}}}))
    env = {**os.environ, "HELM_NEMO_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(source)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out.strip() == "ok", err
    names = sorted(p.name for p in entries(cache))
    assert len(names) == 2 and not any(n.startswith(".") for n in names), names
    for entry in entries(cache):
        kind = "defs" if "-defs-" in entry.name else "doc"
        content = schema_cache._read(entry, kind, fallback=lambda: pytest.fail("a corrupt definition"))
        assert content is not None and dict(content)


def test_validation_is_the_same_with_the_cache_off_cold_and_filled(tmp_path):
    """Messages and verdicts of a clean and a broken render, in fresh processes, whatever the cache holds."""
    script = """
import json, sys
from helm_nemo.validate import validate_manifests
text = open(sys.argv[1]).read()
broken = text.replace("restartPolicy:", "restartPolicyy:", 1).replace("kind: JobSet", "kind: JobSet\\nbogus: 1", 1)
print(json.dumps([[(p.kind, p.name, p.path, p.message, p.check) for p in validate_manifests(t)] for t in (text, broken)]))
"""
    golden = ROOT / "tests/golden/examples/a3ultra-405b.yaml"
    results = []
    for setting in ("", str(tmp_path / "c"), str(tmp_path / "c")):  # off, cold, filled
        env = {**os.environ, "HELM_NEMO_CACHE_DIR": setting, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-c", script, str(golden)], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        results.append(json.loads(proc.stdout))
    written = [entry.name for entry in entries(tmp_path / "c")]
    assert any(name.startswith("jobset_") for name in written)  # the JobSet CRD at least
    assert not any(name.startswith("_definitions") for name in written)  # read in slices (SlicedDefs), no copy
    assert results[0] == results[1] == results[2]
    clean, broken = results[0]
    assert clean == [] and sorted(p[3].split(" (")[0] for p in broken) == [
        "unknown field 'bogus'",
        "unknown field 'restartPolicyy'",
    ]


def test_kubernetes_definitions_are_read_in_slices_exactly_as_parsed_whole():
    """Every shipped Kubernetes version's _definitions.json through SlicedDefs: the same names in the same order
    and every definition equal to json.loads of the whole file, without that whole parse."""
    from helm_nemo.validate.schemas import core_dir, shipped_kube_versions

    for kube in shipped_kube_versions():
        source = (core_dir(kube) / "_definitions.json").read_bytes()
        sliced = schema_cache.SlicedDefs.of(source)
        whole = json.loads(source)["$defs"]
        assert sliced is not None and list(sliced) == list(whole), kube
        assert all(sliced[name] == whole[name] for name in whole), kube
        assert sliced._parsed is None  # no whole parse was needed
        assert isinstance(schema_cache.load_defs(core_dir(kube) / "_definitions.json"), schema_cache.SlicedDefs)


def test_sliced_definitions_fall_back_to_the_whole_document_on_any_surprise(monkeypatch):
    def defs(text: bytes):
        return schema_cache.SlicedDefs.of(text)

    escaped = json.dumps({"$defs": {"a": {"x": 1}, 'b\\q"r': {"y": [1]}, "c": 2}}, indent=2).encode()
    assert dict(defs(escaped)) == {"a": {"x": 1}, 'b\\q"r': {"y": [1]}, "c": 2}
    assert defs(json.dumps({"$defs": {"a": 1}}).encode()) is None  # another layout: not sliced at all
    odd = b'{\n  "$defs": {\n    "a": {"x": 1},\n    "b":{"y": 2}\n  }\n}'  # "b" not on a line of its own form
    sliced = defs(odd)
    assert sliced["b"] == {"y": 2} and sliced["a"] == {"x": 1} and "b" in sliced and "z" not in sliced
    assert sliced._parsed is not None  # it took the whole document
    with pytest.raises(KeyError):
        sliced["z"]
