"""`--as-torch`: make a script's `import torch` get agdb's engine, with clear errors for what it lacks."""
from __future__ import annotations

import sys
import types
from typing import Any

import engine

_SUBMODULES = {
    "torch": engine,
    "torch.autograd": engine.autograd,
    "torch.autograd.graph": engine.autograd.graph,
    "torch.autograd.function": engine.autograd.function,
    "torch.nn": engine.nn,
    "torch.nn.functional": engine.nn.functional,
}


class MissingTorchFeature(AttributeError):
    """The script used a part of torch that agdb's engine does not implement."""


class _Shim(types.ModuleType):
    """A module that forwards to an engine module and names any attribute the engine lacks."""

    def __init__(self, name: str, target: types.ModuleType) -> None:
        super().__init__(name, target.__doc__)
        self.__dict__["_target"] = target

    def __getattr__(self, attr: str) -> Any:
        qualified = f"{self.__name__}.{attr}"
        if qualified in _SUBMODULES and qualified in sys.modules:
            return sys.modules[qualified]  # the shim of the submodule, so its misses are named too
        try:
            return getattr(self.__dict__["_target"], attr)
        except AttributeError:
            raise MissingTorchFeature(
                f"agdb's engine has no {self.__name__}.{attr}: it implements a subset of torch (see README.md, "
                f"'The engine'); run the script without --as-torch to use real torch") from None


def install() -> dict[str, Any]:
    """Point `torch` and its submodules at the engine; returns what was there before, for `uninstall`."""
    saved = {name: sys.modules.get(name) for name in _SUBMODULES}
    for name, target in _SUBMODULES.items():
        sys.modules[name] = _Shim(name, target)
    return saved


def uninstall(saved: dict[str, Any]) -> None:
    """Undo `install`."""
    for name, module in saved.items():
        if module is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = module
