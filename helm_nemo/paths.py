"""Where the project's data lives.

The package runs from a checkout (editable install or the Helm plugin directory), so the data
folders sit next to the package. ``HELM_NEMO_HOME`` overrides that for tests and installs elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    override = os.environ.get("HELM_NEMO_HOME")
    if override:
        return Path(override).resolve()
    return Path(__file__).resolve().parent.parent


def charts_dir() -> Path:
    return project_root() / "charts"


def generator_dir() -> Path:
    return project_root() / "generator"


def schemas_dir() -> Path:
    return project_root() / "schemas"


def accelerators_dir() -> Path:
    return project_root() / "values" / "accelerators"


def examples_dir() -> Path:
    return project_root() / "values" / "examples"
