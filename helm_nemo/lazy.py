"""A package's public names served on first use (`__getattr__`), so importing the package costs nothing until
one is used: the CLI's start-up stays fast."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any


def attribute(package: str, public: dict[str, str], name: str) -> Any:
    """The public `name` of `package`, imported from its module `public[name]` and kept on the package."""
    module = public.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    setattr(sys.modules[package], name, value)
    return value
