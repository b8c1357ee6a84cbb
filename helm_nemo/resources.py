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

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

# The package folder as text: pathlib (~10 ms to import with what it pulls in) is imported when a Path is
# first asked for, so actions/early.py can start helm before it (data_root_name).
_PACKAGE = os.path.dirname(os.path.realpath(__file__))
# What the wheel carries, relative to the data root (setup.py copies exactly these).
DATA_ITEMS = ("charts", "generator", "schemas", "values/accelerators", "values/examples", "CHANGELOG.md")


def __getattr__(name: str) -> Path:
    if name == "PACKAGE_DIR":  # the package folder (a Path)
        from pathlib import Path

        return Path(_PACKAGE)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _packaged_name() -> str | None:
    root = os.path.join(_PACKAGE, "data")
    return root if os.path.isdir(root) else None


@lru_cache(maxsize=1)
def packaged_data() -> Path | None:
    """helm_nemo/data inside an installed wheel; None in a checkout. (What importlib.resources.files("helm_nemo")
    / "data" names for an installed package, found without importing importlib.resources: ~7 ms per run.
    A zipped install is not supported.)"""
    from pathlib import Path

    root = _packaged_name()
    return Path(root) if root else None


def checkout_root() -> Path | None:
    """The repository the package runs from (editable install or plugin directory), if any."""
    from pathlib import Path

    root = Path(_PACKAGE).parent
    return root if (root / "generator").is_dir() and (root / "pyproject.toml").is_file() else None


def data_root_name() -> str:
    """data_root() as text, found without pathlib."""
    override = os.environ.get("HELM_NEMO_HOME")
    if override:
        return os.path.realpath(override)
    return _packaged_name() or os.path.dirname(_PACKAGE)


def shipped_chart_name(kind: str, accelerator: str | None) -> str | None:
    """The shipped chart folder of a chart kind, as text: charts/<kind> when the kind has one chart for every
    accelerator, else charts/<accelerator>/<kind>; None when there is neither. (Text, so actions/early.py can
    ask before pathlib is imported; values/plan.py says what is wrong when this is None.)"""
    if any(name in (".", "..") or "/" in name or os.sep in name for name in (kind, accelerator or "")):
        return None  # a name from a values file: never a path out of the charts folder
    charts = os.path.join(data_root_name(), "charts")
    for folder in (os.path.join(charts, kind), os.path.join(charts, accelerator, kind) if accelerator else None):
        if folder is not None and os.path.isfile(os.path.join(folder, "Chart.yaml")):
            return folder
    return None


def data_root() -> Path:
    from pathlib import Path

    return Path(data_root_name())


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
