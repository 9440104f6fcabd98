"""`--as-torch`: make a script's `import torch` get agdb's engine, with clear errors for what it lacks.

Every `torch.X.Y` name maps to `engine.X.Y`: a module there becomes a shim module, and anything the engine
lacks is named in the error, whether the script reaches it by attribute (`torch.compile`), by `from
torch.nn import Foo` or by `import torch.optim`.
"""
from __future__ import annotations

import ast
import dis
import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

from agdb import engine

_IMPORT_FROM = dis.opmap["IMPORT_FROM"]


def imports_torch(script: str | Path) -> bool:
    """Whether the script's own source imports torch (`import torch`, `import torch.nn as nn`, `from torch
    import ...`); False when it cannot be read or parsed (running it will say why)."""
    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_is_torch(a.name) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _is_torch(node.module):
            return True
    return False


def _is_torch(name: str) -> bool:
    return name == "torch" or name.startswith("torch.")


class MissingTorchFeature(AttributeError):
    """The script used a part of torch that agdb's engine does not implement."""


class MissingTorchImport(ImportError):
    """The script imported a part of torch that agdb's engine does not implement."""


def _missing(name: str) -> str:
    return (f"agdb's engine has no {name}: it implements a subset of torch (see README.md, 'The engine'); "
            f"run the script with --real-torch to use real torch")


class _Shim(types.ModuleType):
    """A module that forwards to an engine module and names any attribute the engine lacks."""

    def __init__(self, name: str, target: types.ModuleType) -> None:
        super().__init__(name, target.__doc__)
        self.__dict__["_target"] = target
        self.__dict__["__path__"] = []  # a package, so that `import torch.x` asks the finder below

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        qualified = f"{self.__name__}.{attr}"
        if qualified in sys.modules:
            return sys.modules[qualified]  # the shim of a submodule, so its misses are named too
        try:
            found = getattr(self.__dict__["_target"], attr)
        except AttributeError:
            # `from torch.nn import Foo` turns an AttributeError into "cannot import name 'Foo'", losing the
            # explanation: for that statement, raise an ImportError of our own.
            caller = sys._getframe(1)
            if caller.f_code.co_code[caller.f_lasti] == _IMPORT_FROM:
                raise MissingTorchImport(_missing(qualified), name=qualified) from None
            raise MissingTorchFeature(_missing(qualified)) from None
        if isinstance(found, types.ModuleType):
            return _shim_of(qualified, found)
        return found


def _shim_of(name: str, target: types.ModuleType) -> _Shim:
    shim = sys.modules.get(name)
    if not isinstance(shim, _Shim):
        shim = sys.modules[name] = _Shim(name, target)
    return shim


class _TorchFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `torch.X.Y` as the shim of `engine.X.Y`, or says the engine lacks it."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not _is_torch(fullname):
            return None
        module: Any = engine
        for part in fullname.split(".")[1:]:
            module = getattr(module, part, None)
        if not isinstance(module, types.ModuleType):
            raise ModuleNotFoundError(_missing(fullname), name=fullname)
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: Any) -> Any:
        module: Any = engine
        for part in spec.name.split(".")[1:]:
            module = getattr(module, part)
        return _Shim(spec.name, module)

    def exec_module(self, module: Any) -> None:
        """Nothing to run: the shim forwards to the engine module."""


_FINDER = _TorchFinder()


def install() -> dict[str, Any]:
    """Point `torch` and its submodules at the engine; returns what was there before, for `uninstall`."""
    saved = {name: module for name, module in sys.modules.items() if _is_torch(name)}
    for name in saved:
        del sys.modules[name]
    sys.modules["torch"] = _Shim("torch", engine)
    sys.meta_path.insert(0, _FINDER)
    return saved


def uninstall(saved: dict[str, Any]) -> None:
    """Undo `install`."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if _is_torch(n)]:
        del sys.modules[name]
    sys.modules.update(saved)
