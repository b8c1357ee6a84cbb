"""ReleasePlan: one release as values/plan.py builds it and every target reads it.

Here on its own, below the plan builder, so the modules that read plans (actions/, targets/, dataprep/) import
the type without importing how plans are built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

from helm_nemo.values.chart_source import released_local_chart


@dataclass
class ReleasePlan:
    """One helm release: which chart, which name, which values (ready for helm)."""

    release: str
    chart_kind: str
    accelerator: str | None
    chart: str  # local chart folder or oci:// reference
    chart_version: str | None
    values: dict[str, Any]
    source: Path
    json_prefix: tuple[Any, ...]  # where this release's values sit in the source file
    warnings: list[str] = field(default_factory=list)
    # Sections for other targets (`slurm:`), taken out of the chart values: helm never sees them.
    target_sections: dict[str, Any] = field(default_factory=dict)
    substitution: Any = None  # the file's SubstitutionResult (which values came from which variables)
    loaded: Any = None  # the file's LoadedValues (positions for errors of the other targets)
    sources: list[Path] = field(default_factory=list)  # every -f file (several merge into one), in order
    pulled: Path | None = None  # an oci:// chart's own folder, pulled with helm to check the values against it
    # A recipe's stages (helm_nemo/dataprep/recipe.py): the earlier releases whose Jobs must complete first
    # (`after:`, and `dataFrom:`), and the data-prep release whose outputs this training reads (`dataFrom:`).
    after: list[str] = field(default_factory=list)
    data_from: str | None = None
    fit: Any = None  # helm_nemo/fit's FitReport of a training release (preflight shows it)

    def values_flags(self) -> str:
        """`--values A [--values B]`: how to name this plan's files again in a hint."""
        return " ".join(f"--values {path}" for path in (self.sources or [self.source]))

    @property
    def local_chart(self) -> Path | None:
        """The chart folder whose schema and defaults apply: the local chart, or for oci://…/NAME with a
        version the generated chart of that name and version when generator/versions.lock says it is
        that released content (so validation and install-time stamping match a local install)."""
        if not self.chart.startswith("oci://"):
            return Path(self.chart)
        if self.pulled is not None:
            return self.pulled
        return released_local_chart(self.chart.rstrip("/").rsplit("/", 1)[-1], self.chart_version)
