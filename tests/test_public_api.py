"""The curated public surface of every package: what is exported, how it is named, that it is
documented, and that everything raised on purpose is a RecallKitError."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import memory_store
import recall_kit
import recall_kit_bench
from memory_store import RecallKitError

PACKAGES = ["memory_store", "recall_kit", "recall_kit_bench", "recall_kit_cli"]


def public_modules() -> list[ModuleType]:
    """Every module of the four packages whose dotted name has no ``_`` part."""
    modules = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        modules.append(root)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                modules.append(importlib.import_module(info.name))
    return modules


def public_names(module: ModuleType) -> list[tuple[str, object]]:
    names = getattr(module, "__all__", None)
    if names is None:  # a module without __all__: what it defines itself
        names = [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__]
    return [(name, getattr(module, name)) for name in names]


def members(cls: type) -> list[tuple[str, object]]:
    """The public methods and properties ``cls`` defines itself (not what it inherits)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if inspect.isfunction(value) or isinstance(value, property):
            found.append((name, value))
    return found


@pytest.mark.parametrize("package", [memory_store, recall_kit])
def test_the_lazy_exports_agree_with_what_type_checkers_read(package: ModuleType) -> None:
    tree = ast.parse(Path(package.__file__).read_text())
    checked = {
        alias.asname or alias.name: node.module
        for block in tree.body if isinstance(block, ast.If)
        for node in block.body if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert checked == package._EXPORTS


def _is_public(module_name: str) -> bool:
    return not any(part.startswith("_") for part in module_name.split("."))


def test_every_public_name_of_every_public_module_prints_a_public_module_that_exports_it() -> None:
    wrong = []
    for module in public_modules():
        for name, value in public_names(module):
            if not (inspect.isclass(value) or inspect.isfunction(value)):
                continue  # constants and aliases have no module of their own
            shown = value.__module__
            if not shown.startswith(tuple(PACKAGES)):
                continue  # re-exported from elsewhere (the standard library, click): not ours to name
            home = importlib.import_module(shown)
            if not _is_public(shown) or getattr(home, value.__name__, None) is not value:
                wrong.append(f"{module.__name__}.{name} prints as {shown}.{value.__name__}")
    assert wrong == []


@pytest.mark.parametrize(
    ("module", "name"),
    [("recall_kit.selection", "Manifest"), ("recall_kit.tuning", "GateSettings"), ("recall_kit.testing", "Oracle"),
     ("recall_kit.cache", "CacheFile"), ("recall_kit", "Recaller"), ("memory_store", "MemoryRoot"),
     ("recall_kit_bench", "EvalDataset"), ("recall_kit.turns", "FastStage"), ("recall_kit.turns", "Selector"),
     ("recall_kit.turns", "TurnRunner")],
)
def test_a_public_class_prints_as_the_module_users_import_it_from(module: str, name: str) -> None:
    value = getattr(importlib.import_module(module), name)
    assert f"{value.__module__}.{value.__qualname__}" == f"{module}.{name}"


def test_selection_re_exports_no_private_name() -> None:
    tree = ast.parse(Path(importlib.import_module("recall_kit.selection").__file__).read_text())
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names]
    assert [name for name in imported if name.startswith("_")] == []


def test_every_public_function_method_and_property_has_a_docstring() -> None:
    missing = []
    for module in public_modules():
        for name, value in public_names(module):
            where = f"{module.__name__}.{name}"
            if inspect.isclass(value) or inspect.isfunction(value):
                if not _written_doc(value):
                    missing.append(where)
            if inspect.isclass(value) and value.__module__.startswith(tuple(PACKAGES)):
                for member, attr in members(value):
                    doc = attr.__doc__ if not isinstance(attr, property) else (attr.fget.__doc__ if attr.fget else None)
                    if not (doc or "").strip() and not _documented_by_base(value, member):
                        missing.append(f"{where}.{member}")
    assert missing == [], f"{len(missing)} without a docstring: {sorted(set(missing))}"


def _written_doc(value: object) -> str:
    """The docstring as written: a dataclass without one gets its signature as ``__doc__``."""
    doc = (getattr(value, "__doc__", None) or "").strip()
    if inspect.isclass(value) and dataclasses.is_dataclass(value):
        generated = value.__name__ + str(inspect.signature(value)).replace(" -> None", "")
        return "" if doc == generated else doc
    return doc


def _documented_by_base(cls: type, name: str) -> bool:
    """An override of a documented method of a base (or a protocol it implements) needs no second copy."""
    for base in cls.__mro__[1:]:
        attr = vars(base).get(name)
        if attr is not None and (getattr(attr, "__doc__", None) or "").strip():
            return True
    return False


def all_modules() -> list[ModuleType]:
    """Every module of the four packages, private ones included."""
    modules = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        modules.append(root)
        names = [info.name for info in pkgutil.walk_packages(root.__path__, f"{package}.")]
        modules += [importlib.import_module(name) for name in names if not name.endswith(".__main__")]  # it runs
    return modules


def test_every_exception_raised_on_purpose_is_a_recall_kit_error() -> None:
    # internal control flow may use its own exceptions, named with a leading underscore
    for module in all_modules():
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ in (module.__name__, module.__name__.rsplit(".", 1)[0])
                and not name.startswith("_")
            ):
                assert issubclass(value, RecallKitError), f"{module.__name__}.{name} is not a RecallKitError"


def test_misuse_raises_a_named_error() -> None:
    import asyncio

    from recall_kit import FastHeuristic, Recaller, SessionClosedError, UsageError
    from memory_store import Snapshot

    async def misuse() -> None:
        with Recaller(Snapshot.build(1, {}, ())) as recaller:
            session = recaller.session()
            with pytest.raises(UsageError, match="unknown cancel reason"):
                session.cancel("because")  # type: ignore[arg-type]
            with pytest.raises(UsageError, match="unknown consume point"):
                await session.consume("later")  # type: ignore[arg-type]
            await session.close()
            with pytest.raises(SessionClosedError):
                session.begin("anything")

    asyncio.run(misuse())
    assert issubclass(SessionClosedError, UsageError) and issubclass(UsageError, RecallKitError)
    assert FastHeuristic is recall_kit.FastHeuristic
