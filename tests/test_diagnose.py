"""The diagnosis library piece by piece, on logs of the corpus (tests/logs/real/, real programs' output):
tracebacks, torchrun's summary, the verdict's order, flight-recorder dumps, and the offline CLI."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from helm_nemo.diagnose import diagnose_paths, diagnose_texts, flight, lines, scan
from helm_nemo.diagnose.events import Hang
from helm_nemo.user_errors import UserError

PUBLIC = Path(__file__).resolve().parent / "logs" / "real" / "public"
ROOT = Path(__file__).resolve().parent.parent


def _log(case: str) -> str:
    return (PUBLIC / case / "log.txt").read_text(encoding="utf-8")


def test_every_signature_has_a_class_a_role_a_title_and_a_hint():
    classes = {"cuda-oom", "host-oom", "segfault", "abort", "nccl-timeout", "worker-exit", "rendezvous"}
    classes |= {"nccl-error", "nan-loss", "disk-full", "data-missing", "gpu-lost", "cuda-error", "bus-error"}
    classes |= {"import-error", "python-exception", "data-prep", "terminated", ""}
    classes |= {"stopped", "stall", "fabric", "checkpoint", "network", "config", "data-error"}
    for sig in lines.signatures():
        assert sig.klass in classes, sig.id
        assert sig.title and sig.hint, sig.id
        assert (sig.klass == "") == (sig.role == "warning"), sig.id


def test_the_specific_exception_inside_a_traceback_names_the_cause():
    found = scan.scan(_log("dolly-139-no-space-left-torch-save"), "log.txt")
    causes = [e for e in found.events if e.role == "cause"]
    assert causes[0].klass == "disk-full"
    assert "OSError: [Errno 28] No space left on device" in causes[0].text


def test_torchrun_summary_root_cause_rank_and_exit_code():
    diagnosis = diagnose_texts([("log.txt", _log("llamafactory-7032-root-cause-exitcode-1"))])
    assert diagnosis.cause is not None
    assert (diagnosis.cause.klass, diagnosis.cause.rank) == ("worker-exit", "0")
    assert "exitcode  : 1 (pid: 14661)" in diagnosis.cause.text


def test_a_summary_pasted_without_its_root_cause_takes_its_first_failure():
    diagnosis = diagnose_texts([("log.txt", _log("pla-18-ranks-exitcode-1-no-traceback"))])
    assert diagnosis.cause is not None and diagnosis.cause.klass == "worker-exit"
    assert diagnosis.cause.rank == "1"
    assert {e.signature for e in diagnosis.consequences} >= {"worker-exit", "child-failed"}


def test_signal_exit_codes_name_the_signal():
    segv = diagnose_texts([("log.txt", _log("megatron-lm-1880-torchrun-sigsegv"))]).cause
    assert segv is not None and segv.klass == "segfault" and "Signal 11 (SIGSEGV)" in segv.text
    kill = diagnose_texts([("log.txt", _log("amvur-2-launch-sigkill-memory-growth"))]).cause
    assert kill is not None and kill.klass == "host-oom"
    assert kill.title == "killed (SIGKILL: the kernel's OOM killer or a kill)"


def test_torchrun_error_file_is_read_when_it_exists(tmp_path):
    """torchrun's error file (the JSON torch.distributed.elastic writes, {"message": {"message", "extraInfo"}})
    names the exception when the summary shows none."""
    log = _log("llamafactory-7032-root-cause-exitcode-1")
    error_file = tmp_path / "error.json"
    error_file.write_text(
        json.dumps(
            {
                "message": {
                    "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
                    "extraInfo": {"py_callstack": "Traceback (most recent call last): …", "timestamp": "1700000000"},
                }
            }
        )
    )
    assert "error_file: <N/A>" in log
    with_file = log.replace("error_file: <N/A>", f"error_file: {error_file}", 1)
    cause = diagnose_texts([("log.txt", with_file, tmp_path)]).cause
    assert cause is not None and cause.klass == "cuda-oom"
    missing = log.replace("error_file: <N/A>", f"error_file: {tmp_path / 'gone.json'}", 1)
    assert diagnose_texts([("log.txt", missing)]).cause.klass == "worker-exit"  # type: ignore[union-attr]


def test_without_times_a_cause_in_one_file_beats_a_peer_timeout_in_another():
    oom = _log("gpt2-chinese-215-cuda-oom")
    timeout = _log("llamafactory-7396-allreduce-watchdog-timeout")
    diagnosis = diagnose_texts([("rank0.log", timeout), ("rank1.log", oom)])
    assert diagnosis.cause is not None and (diagnosis.cause.klass, diagnosis.cause.source) == ("cuda-oom", "rank1.log")
    assert any(e.klass == "nccl-timeout" and e.source == "rank0.log" for e in diagnosis.consequences)


def test_kubelet_times_order_causes_across_pods():
    """The same two real failures, stamped as `kubectl logs --timestamps` prints them: the earlier wins."""

    def stamped(text: str, second: int) -> str:
        return "".join(f"2026-01-05T10:00:{second:02d}.000000000Z {line}\n" for line in text.splitlines())

    oom, nan = _log("gpt2-chinese-215-cuda-oom"), _log("megatron-lm-5026-ci-nan-grad-norm")
    first = diagnose_texts([("pod-a", stamped(oom, 30)), ("pod-b", stamped(nan, 10))], kind="pod")
    assert first.cause is not None and (first.cause.klass, first.cause.source) == ("nan-loss", "pod-b")
    assert first.cause.at == "2026-01-05T10:00:10.000000000"
    later = diagnose_texts([("pod-a", stamped(oom, 5)), ("pod-b", stamped(nan, 10))], kind="pod")
    assert later.cause is not None and later.cause.source == "pod-a"
    assert later.as_json()["cause"]["pod"] == "pod-a"


def test_healthy_logs_are_not_failed():
    for case in ("megatron-lm-756-healthy-mixtral-h100", "lightning-14428-healthy-max-epochs-reached"):
        diagnosis = diagnose_texts([("log.txt", _log(case))])
        assert not diagnosis.failed, diagnosis.cause


def _dump(entries: list[dict[str, object]]) -> dict[str, object]:
    """A dump as ProcessGroupNCCL writes it (torch/distributed/flight_recorder reads these keys)."""
    return {
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2]"}},
        "entries": entries,
    }


def _entry(seq: int, state: str) -> dict[str, object]:
    return {
        "pg_id": 0,
        "process_group": ("0", "default_pg"),
        "collective_seq_id": seq,
        "p2p_seq_id": 0,
        "profiling_name": "nccl:all_reduce",
        "state": state,
        "is_p2p": False,
    }


def test_flight_recorder_names_the_rank_that_did_not_join(tmp_path):
    dumps = {
        0: _dump([_entry(29, "completed"), _entry(30, "scheduled")]),
        1: _dump([_entry(29, "completed")]),
        2: _dump([_entry(29, "completed"), _entry(30, "started")]),
    }
    paths = {}
    for rank, data in dumps.items():
        paths[rank] = tmp_path / f"nccl_trace_rank_{rank}"
        paths[rank].write_bytes(pickle.dumps(data))
    read = {rank: flight.load(path) for rank, path in paths.items()}
    hang = flight.analyse(read, Hang())
    assert hang.not_joined == [1]
    assert hang.collective == "nccl:all_reduce #30 of process group 0 (default_pg)"
    del read[2]
    assert flight.analyse(read).no_dump == [2]


def test_flight_recorder_dumps_are_never_unpickled_into_objects(tmp_path):
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    path = tmp_path / "nccl_trace_rank_0"
    path.write_bytes(pickle.dumps({"entries": [Evil()]}))
    with pytest.raises(ValueError, match="not a flight-recorder dump"):
        flight.load(path)
    assert not marker.exists()


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "helm_nemo", "logs", "--errors", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=ROOT,
    )


def test_offline_cli_exit_codes_and_json(tmp_path):
    failed = _cli("--file", str(PUBLIC / "gpt2-chinese-215-cuda-oom"), "-o", "json")
    assert failed.returncode == 1, failed.stderr
    doc = json.loads(failed.stdout)
    assert list(doc)[:2] == ["failed", "cause"] and doc["cause"]["signature"] == "cuda-oom"
    assert doc["cause"]["file"].endswith("log.txt") and doc["cause"]["hint"]
    healthy = _cli("--file", "-", stdin=_log("megatron-lm-756-healthy-mixtral-h100"))
    assert (healthy.returncode, healthy.stdout.split(" in ")[0]) == (0, "no failure found"), healthy.stdout
    text = _cli("--file", str(PUBLIC / "megatron-lm-1880-torchrun-sigsegv" / "log.txt"))
    assert text.stdout.startswith("FAILED: segfault: segmentation fault"), text.stdout
    binary = tmp_path / "core"
    binary.write_bytes(b"\x7fELF\x00\x00binary")
    empty = tmp_path / "empty"
    empty.mkdir()
    for bad, words in (
        (str(tmp_path / "missing.log"), "no such file or folder"),
        (str(binary), "a binary file, not a log"),
        (str(empty), "the folder holds no log"),
    ):
        run = _cli("--file", bad)
        assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) <= 2


def test_bad_input_from_the_library():
    with pytest.raises(UserError):
        diagnose_paths(["/nonexistent/log"])


def _metrics(case: str, start: int, end: int):  # type: ignore[no-untyped-def]
    from helm_nemo.metrics import Request, measure

    return measure(
        Request(
            file=str(PUBLIC / case / "log.txt"),
            start_step=start,
            end_step=end,
            batch_size=8,
            gpus=8,
            model=None,
            model_flops=1e12,
            seq_length=None,
            accelerator=None,
            peak_tflops=989.0,
            precision=None,
            values=None,
            release=None,
        )
    )


def test_metrics_of_a_failed_log_keep_the_step_time_and_say_the_run_failed():
    failed = _metrics("megatron-deepspeed-396-grad-norm-nan", 5425, 5427)
    assert failed.step_time_s > 0 and failed.failure is not None
    assert failed.failure["signature"] == "nan-loss" and failed.as_json()["failure"] == failed.failure
    assert failed.text().startswith("FAILED: the run failed: nan-loss (line ")
    healthy = _metrics("megatron-lm-756-healthy-mixtral-h100", 42, 44)
    assert healthy.failure is None and healthy.as_json()["failure"] is None
    assert healthy.text().startswith("Average step time")


def _killed(pod: str, exit_code: int, at: str, reason: str = "Error"):  # type: ignore[no-untyped-def]
    from helm_nemo.status.pods import PodProblem

    words = f"exit code {exit_code} (SIGKILL)" if reason == "Error" else "out of memory (OOMKilled)"
    return PodProblem(pod, reason, words, "workload", exit_code, at)


def test_a_pod_sigkilled_after_another_failed_is_the_sets_teardown_not_the_cause():
    """gpu/hang: rank 1 hangs; rank 0's watchdog fires and node 0 exits 1; node 1, still hung, is SIGKILLed
    (exit 137, no line of its own) ten seconds after the set stopped: a consequence. Alone, or first, exit 137 is
    the cause (a kill nobody logged); the kubelet's OOMKilled is a cause whenever it comes."""
    from helm_nemo.diagnose import pods, verdict

    hang = PUBLIC.parent / "gpu" / "hang"
    texts = [(name, (hang / name).read_text(encoding="utf-8")) for name in ("node-0.log", "node-1.log")]
    teardown = pods.events([_killed("node-1.log", 137, "2026-11-26T20:47:39Z")])
    diagnosis = diagnose_texts(texts, kind="pod", extra=teardown)
    assert (diagnosis.cause.source, diagnosis.cause.klass) == ("node-0.log", "nccl-timeout")
    killed = next(e for e in diagnosis.consequences if e.signature == "sigkill")
    assert (killed.source, killed.why) == ("node-1.log", verdict.KILLED_IN_TEARDOWN)
    before = pods.events([_killed("node-1.log", 137, "2026-11-26T20:46:00Z")])  # before any line of node 0
    assert diagnose_texts(texts, kind="pod", extra=before).cause.signature == "sigkill"
    oom = pods.events([_killed("node-1.log", 137, "2026-11-26T20:47:39Z", reason="OOMKilled")])
    assert diagnose_texts(texts, kind="pod", extra=oom).cause.klass == "host-oom"


def test_the_real_hang_dumps_in_a_folder_of_their_own_name_the_rank_that_did_not_join(tmp_path):
    """The run's dump folder (workload.flightRecorder writes it on the run's storage) named beside the pods' logs:
    the real dumps of gpu/hang say rank 1 never joined all_reduce #108; the folder alone is not a diagnosis."""
    case = ROOT / "tests/logs/real/gpu/hang"
    dumps, logs = tmp_path / "flight-recorder", tmp_path / "logs"
    dumps.mkdir()
    logs.mkdir()
    for path in case.glob("nccl_trace_rank_*"):
        (dumps / path.name).write_bytes(path.read_bytes())
    for path in case.glob("node-*.log"):
        (logs / path.name).write_bytes(path.read_bytes())
    diagnosis = diagnose_paths([str(dumps), str(logs)])
    assert diagnosis.cause is not None and diagnosis.cause.klass == "nccl-timeout"
    assert diagnosis.hang is not None and diagnosis.hang.not_joined == [1]
    assert diagnosis.hang.collective == "nccl:all_reduce #108 of process group 0 (default_pg)"
    with pytest.raises(UserError, match="only flight-recorder dumps"):
        diagnose_paths([str(dumps)])


def _case(name: str) -> Path:
    return next((PUBLIC.parent).glob(f"*/{name}"))


def test_an_unknown_exception_is_titled_by_its_type_message_and_raiser():
    cause = diagnose_paths([str(_case("dat-51-init-dist-keyerror-rank"))]).cause
    assert cause.klass == "python-exception"
    # the innermost frame outside the standard library: os.environ raised it, the program's dist_util asked
    assert cause.title == "KeyError: 'RANK' (raised in dist_util)"
    assert cause.raised_in == "dist_util (dist_util.py:22 in _init_dist_pytorch)"


def test_a_class_from_the_raising_frames():
    # no signature names `KeyError: 'iteration'`; Megatron's checkpointing raised it
    cause = diagnose_paths([str(_case("dlrover-977-flash-ckpt-megatron-keyerror-iteration"))]).cause
    assert (cause.klass, cause.signature) == ("checkpoint", "raised-checkpoint")
    # an assert on the parsed arguments is the program refusing its configuration
    cause = diagnose_paths([str(_case("matchsum-11-batch-size-not-multiple-of-gpus"))]).cause
    assert cause.klass == "config"


def test_fabric_xid_and_nccl_numbers_are_said_in_words():
    cause = diagnose_paths([str(_case("nccl-1405-k8s-net-ib-status12-vendor129"))]).cause
    assert cause.klass == "fabric"
    assert "status 12 (IBV_WC_RETRY_EXC_ERR): transport retry counter exceeded" in cause.title
    assert "NCCL returned ncclRemoteError (6)" in cause.title
    cause = diagnose_paths([str(_case("akash-support-244-xid94-contained-ecc-gpu-unhealthy"))]).cause
    assert "Xid 94: contained ECC error" in cause.title and "a hardware fault" in cause.title


def test_an_application_xid_gives_way_to_a_hardware_xid():
    """Xid 43 (a channel reset after the program's own fault) is printed before Xid 94 (contained ECC): the hardware
    fault is the first cause."""
    cause = diagnose_paths([str(_case("akash-support-244-xid94-contained-ecc-gpu-unhealthy"))]).cause
    assert "94, pid=" in cause.text


def test_a_stop_from_outside_comes_before_the_peers_errors():
    diagnosis = diagnose_paths([str(_case("stopped-sigterm"))])
    assert diagnosis.cause.klass == "stopped"
    assert Path(diagnosis.cause.source).name == "node-1.log"
    assert "Received 15 death signal" in diagnosis.cause.text


def test_every_line_a_signature_matches_holds_a_keyword():
    """lines.candidates finds the lines worth reading by the keywords alone: on every corpus log, each line the
    signatures' pattern matches must hold one (else the prefilter would hide it)."""
    pattern = lines.trigger()
    keywords = lines.keywords()
    missed = []
    for path in sorted((PUBLIC.parent).glob("*/*/*")):
        if path.name == "case.yaml" or path.name.startswith("nccl_trace") or not path.is_file():
            continue
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            if pattern.search(line) and not any(word in line for word in keywords):
                missed.append(f"{path.parent.name}: {line[:120]}")
    assert missed == []


def test_a_cloud_logging_export_of_two_pods_is_read_as_two_logs():
    """One JSON object a line, newest first, two pods in one file: each pod's log in time order."""
    import json

    from helm_nemo.diagnose import diagnose_texts

    entries = []
    for index in (0, 1):
        text = (_case("cuda-oom") / f"node-{index}.log").read_text(encoding="utf-8")
        for line in text.rstrip("\n").split("\n"):
            stamp, _, rest = line.partition(" ")
            entries.append(
                {"timestamp": stamp, "textPayload": rest, "resource": {"labels": {"pod_name": f"p-{index}"}}}
            )
    entries.sort(key=lambda e: e["timestamp"], reverse=True)
    export = "\n".join(json.dumps(e) for e in entries) + "\n"
    diagnosis = diagnose_texts([("export.json", export)])
    assert diagnosis.sources == 2
    assert diagnosis.cause.klass == "cuda-oom"
    assert diagnosis.cause.source == "export.json:p-1"


def test_a_stop_after_minutes_without_a_step_is_a_stall():
    """The real run: rank 0's data loader stopped at step 40, the deadline's SIGTERM came 363 s later (status's
    STALLED rule: more than max(10 x 0.1 s, 300 s))."""
    cause = diagnose_paths([str(_case("stall-long-1node"))]).cause
    assert cause.klass == "stall"
    assert cause.title.startswith("stopped after 6 min without a step (last step 39; steps took 0.1 s)")
    # the same stall stopped after 51 s is under status's 5-minute floor: a stop, not (yet) a stall
    assert diagnose_paths([str(_case("stall-deadline"))]).cause.klass == "stopped"
