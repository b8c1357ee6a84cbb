"""Measuring the diagnosis on a corpus of real logs (tests/logs/real/: one folder per run with case.yaml
holding its true first cause): per class precision and recall, overall accuracy. Used by
tests/test_diagnosis_corpus.py and scripts/diagnosis_table.py (the table docs/status.md shows)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.diagnose.events import Diagnosis


@dataclass
class Outcome:
    """One case: what is true, what the verdict said, and whether it is right."""

    case: str
    truth: str  # class, or healthy
    said: str  # class, or healthy
    truth_file: str = ""
    said_file: str = ""
    truth_line: str = ""
    said_line: str = ""
    multi: bool = False

    @property
    def class_right(self) -> bool:
        return self.truth == self.said

    @property
    def file_right(self) -> bool:
        return not self.multi or not self.truth_file or self.said_file == self.truth_file

    @property
    def line_right(self) -> bool:
        return not self.truth_line or _squash(self.truth_line) in _squash(self.said_line)

    @property
    def right(self) -> bool:
        return self.class_right and self.file_right and (self.truth == "healthy" or self.line_right)


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class Table:
    """The outcomes over the corpus, and the figures the docs table shows."""

    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.truth != "healthy"]

    @property
    def healthy(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.truth == "healthy"]

    @property
    def accuracy(self) -> float:
        return sum(o.right for o in self.failures) / max(1, len(self.failures))

    @property
    def healthy_called_failed(self) -> list[Outcome]:
        return [o for o in self.healthy if o.said != "healthy"]

    @property
    def multi_file_wrong(self) -> list[Outcome]:
        return [o for o in self.failures if o.multi and not o.file_right]

    def per_class(self) -> list[tuple[str, int, int, int, float, float]]:
        """(class, cases, said, right, precision, recall) per class, healthy last."""
        classes = sorted({o.truth for o in self.outcomes} | {o.said for o in self.outcomes}, key=_class_order)
        rows = []
        for name in classes:
            truth = [o for o in self.outcomes if o.truth == name]
            said = [o for o in self.outcomes if o.said == name]
            right = [o for o in truth if o.right]
            said_right = [o for o in said if o.right]
            precision = len(said_right) / len(said) if said else 1.0
            recall = len(right) / len(truth) if truth else 1.0
            rows.append((name, len(truth), len(said), len(right), precision, recall))
        return rows

    def markdown(self) -> str:
        lines = [
            "| class | cases | named | right | precision | recall |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, cases, said, right, precision, recall in self.per_class():
            lines.append(f"| `{name}` | {cases} | {said} | {right} | {precision:.0%} | {recall:.0%} |")
        fails = self.failures
        lines.append(
            f"| **all failures** | {len(fails)} | | {sum(o.right for o in fails)} | | **{self.accuracy:.1%}** |"
        )
        lines.append("")
        multi = [o for o in fails if o.multi]
        lines.append(
            f"Failed runs with the right first cause: {sum(o.right for o in fails)} of {len(fails)} "
            f"({self.accuracy:.1%}); healthy logs called failed: {len(self.healthy_called_failed)} of "
            f"{len(self.healthy)}; multi-file cases naming the first failing file: "
            f"{sum(o.file_right for o in multi)} of {len(multi)}."
        )
        return "\n".join(lines)


def _class_order(name: str) -> tuple[bool, str]:
    return (name == "healthy", name)


def cases(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("case.yaml"))


def evaluate(folder: Path) -> tuple[Outcome, Diagnosis]:
    """Run the offline verdict on one case folder and compare it with its case.yaml."""
    import yaml

    from helm_nemo.diagnose import diagnose_paths

    case = yaml.safe_load((folder / "case.yaml").read_text(encoding="utf-8"))
    truth = case.get("truth") or {}
    diagnosis = diagnose_paths([str(folder)])
    logs = [p for p in folder.iterdir() if p.is_file() and p.name != "case.yaml" and not p.name.startswith(".")]
    from helm_nemo.diagnose import flight

    logs = [p for p in logs if flight.rank_of(p.name) is None and p.suffix not in (".json", ".pkl")]
    cause = diagnosis.cause
    outcome = Outcome(
        folder.name,
        str(truth.get("class") or "healthy"),
        (cause.klass or cause.signature) if cause else "healthy",
        str(truth.get("file") or ""),
        Path(cause.source).name if cause else "",
        str(truth.get("line") or ""),
        cause.text if cause else "",
        multi=len(logs) > 1,
    )
    return outcome, diagnosis


def table(root: Path) -> Table:
    return Table([evaluate(folder)[0] for folder in cases(root)])


BEGIN = "<!-- diagnosis-table: begin (scripts/diagnosis_table.py writes it) -->"
END = "<!-- diagnosis-table: end -->"


def shown_table(doc: Path) -> str:
    """The table between the markers of a document, or ""."""
    text = doc.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return ""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write_table(doc: Path, found: Table) -> bool:
    """Put the table between the markers of `doc`; True when it changed."""
    text = doc.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}\n{found.markdown()}\n{END}{tail}"
    if new == text:
        return False
    doc.write_text(new, encoding="utf-8")
    return True
