"""Why did the run fail? One verdict over the logs of a run: the first cause, its consequences, the next step.

- lines.py + signatures.yaml: the failure lines the programs print (data), a line's time, prefix and rank;
- tracebacks.py: a Python traceback's exception line (the specific cause inside a traceback);
- formats.py: a log shipper's JSON export (Cloud Logging, CloudWatch) read as the pod logs it holds;
- raisers.py: an exception no signature names, classed by where it was raised; meanings.py: Xid, IB, NCCL codes;
- stall.py: a stop from outside after a long time without a step is a stall;
- torchrun.py: torchrun's error summary (the root-cause rank, the exit code's signal, the error file);
- steps.py: the last training step per log or rank (who is behind in a hang);
- flight.py: PyTorch flight-recorder dumps, read without unpickling objects (who did not join);
- scan.py: one log -> its events; verdict.py: every log -> one Diagnosis; sources.py: files, folders, stdin;
- render.py: the text and JSON `helm nemo logs --errors` prints.

`diagnose_texts([(name, text)])` and `diagnose_paths([path])` are what the CLI and the tests call.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from pathlib import Path

    from helm_nemo.diagnose.events import Diagnosis, Event


def diagnose_texts(
    texts: list[tuple[str, str]] | list[tuple[str, str, Path | None]],
    *,
    kind: str = "file",
    extra: list[Event] | None = None,
    dumps: dict[int, Path] | None = None,
    nodes: dict[str, str] | None = None,
) -> Diagnosis:
    """The verdict over log texts (name, text[, folder of its torchrun error files]), in the order given
    (the order decides between logs without times); `extra`: events from elsewhere (pod states)."""
    from helm_nemo.diagnose.scan import scan
    from helm_nemo.diagnose.verdict import decide

    from helm_nemo.diagnose.formats import expand

    scans = []
    logs: list[tuple[str, str]] = []
    for item in texts:
        base = item[2] if len(item) > 2 else None
        for name, text in expand(item[0], item[1]):  # a log shipper's JSON export: its pods' logs
            logs.append((name, text))
            scans.append(scan(text, name, node=(nodes or {}).get(name, ""), base=base))
    diagnosis = decide(scans, extra, kind=kind)
    if diagnosis.cause is not None and diagnosis.cause.klass == "stopped":
        from helm_nemo.diagnose import stall

        stall.explain(diagnosis, logs)
    if dumps and diagnosis.cause is not None and diagnosis.cause.klass == "nccl-timeout":
        from helm_nemo.diagnose import flight
        from helm_nemo.diagnose.events import Hang

        read = {}
        for rank, path in sorted(dumps.items()):
            try:
                read[rank] = flight.load(path)
            except (OSError, ValueError) as err:
                diagnosis.hang = diagnosis.hang or Hang()
                diagnosis.hang.notes.append(str(err))
        if read:
            diagnosis.hang = flight.analyse(read, diagnosis.hang)
    return diagnosis


def diagnose_paths(paths: list[str], stdin: object = None) -> Diagnosis:
    """The verdict over log files, folders of them and `-` (stdin); UserError (exit 2) for bad input."""
    from helm_nemo.diagnose.sources import read

    logs = read(paths, stdin)
    return diagnose_texts(logs.texts, dumps=logs.dumps)
