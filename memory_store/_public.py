"""How a public module shows what it exports: as its own names, not as the private modules that define them.

Standard library only, and nothing slow to import: the hook loads it with the errors on every prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import FunctionType


def fixup_module_metadata(module_name: str, namespace: Mapping[str, object], names: Iterable[str] | None = None) -> None:
    """Show every class and function in ``namespace`` (``names``: only those; else every name without a
    leading ``_``) that a private module of ``module_name``'s package defines as defined in
    ``module_name``: ``recall_kit.selection.Manifest`` prints as that, not as ``recall_kit._manifest``.

    Every public module that exports names from private modules calls it once, on what it exports (a
    lazy package, on what it has just loaded). A name a public module already shows is left as it is,
    so each name keeps its first public home."""
    package = module_name.partition(".")[0]
    for name in names if names is not None else [name for name in namespace if not name.startswith("_")]:
        value = namespace[name]
        if not isinstance(value, (type, FunctionType)):
            continue  # a constant, an alias: it has no module of its own to show
        shown = value.__module__
        if shown.partition(".")[0] == package and _is_private(shown):
            value.__module__ = module_name


def _is_private(module_name: str) -> bool:
    return any(part.startswith("_") for part in module_name.split("."))
