"""Where the project's data lives: charts, schemas, accelerator profiles, generator sources, examples.

One answer for every way the package runs, so the wheel and the checkout behave the same:
  * ``HELM_NEMO_HOME``: a root with the checkout's layout (tests; a user's own chart tree);
  * an installed wheel: the data ships inside the package as ``helm_nemo/data/`` (the package's own
    resources; the same bytes as the repository's folders, see setup.py);
  * a checkout (editable install, the plugin installed from a directory): the folders next to the package.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# What the wheel carries, relative to the data root (setup.py copies exactly these).
DATA_ITEMS = ("charts", "generator", "schemas", "values/accelerators", "values/examples", "CHANGELOG.md")


@lru_cache(maxsize=1)
def packaged_data() -> Path | None:
    """helm_nemo/data inside an installed wheel; None in a checkout. (What importlib.resources.files("helm_nemo")
    / "data" names for an installed package, found without importing importlib.resources: ~7 ms per run.
    A zipped install is not supported.)"""
    root = PACKAGE_DIR / "data"
    return root if root.is_dir() else None


def checkout_root() -> Path | None:
    """The repository the package runs from (editable install or plugin directory), if any."""
    root = PACKAGE_DIR.parent
    return root if (root / "generator").is_dir() and (root / "pyproject.toml").is_file() else None


def data_root() -> Path:
    override = os.environ.get("HELM_NEMO_HOME")
    if override:
        return Path(override).resolve()
    return packaged_data() or PACKAGE_DIR.parent


def is_packaged() -> bool:
    """True when the data is the installed package's own (read only: never written to)."""
    return not os.environ.get("HELM_NEMO_HOME") and packaged_data() is not None


def charts_dir() -> Path:
    return data_root() / "charts"


def generator_dir() -> Path:
    return data_root() / "generator"


def schemas_dir() -> Path:
    return data_root() / "schemas"


def accelerators_dir() -> Path:
    return data_root() / "values" / "accelerators"


def examples_dir() -> Path:
    return data_root() / "values" / "examples"
