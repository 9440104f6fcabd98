"""Saved tensors as PyTorch's SavedVariable: `_saved_*` values, `_raw_saved_*` (SavedTensor) and saved-tensor hooks.

NOTE [saved tensors]
A node keeps each saved tensor in a slot named as in PyTorch (`self`, `other`, `result`) and listed, in the order
PyTorch saves them, in its class's `_saved_tensor_names`; record() notes (tensor, version, grad_fn, output_nr) for
each in `node._saved_versions`, a plain tuple. Backward reads the slots directly and only compares versions. That
is the common path, and nothing in this module runs on it.

A node leaves it when a saved tensor gets hooks (it was saved under `saved_tensors_hooks`, or
`_raw_saved_<name>.register_hooks` was called) or a SavedTensor of it was asked for: its `_saved_versions` becomes
a SavedRecords with one SavedTensor per saved slot, and from then on each apply first unpacks every one of them
into its slot, as PyTorch's generated code unpacks all saved variables before the formula.

Under hooks the inputs are packed by save_inputs() (engine/_ops/_common.py) right after the node is made, before
the op's checks and kernel (a SavedRecords with `early` set, holding the saved leaves' AccumulateGrads until the
node's edges do); record() packs the outputs after them and binds every SavedTensor to its slot at once. A
SavedTensor refers to its node weakly, and to the node as its saved output's grad_fn only by a marker, as a
SavedVariable does not own its node: saved tensors never make a reference cycle that keeps a graph alive.

Unpacking follows SavedVariable::unpack. Without hooks, a saved input comes back as the very same tensor object
and a saved output as a new tensor object sharing its data, with the node as grad_fn. With hooks, what the unpack
hook returns is wrapped in a new tensor carrying the saved tensor's history (its grad_fn, or its leaf's
AccumulateGrad), unless the saved tensor had none; versions are then not checked.

Must not import tracer/.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from . import _state
from ._node import _FREED, ERR_BACKWARD_TWICE, Node, check_not_detached, modified_in_place, own, unpacked_origin
from ._state import no_grad, tls
from ._tensor import Tensor, grad_accumulator, make_tensor
from ._version import OWNER, version_of

_INT64_WRAP = 2 ** 64

ERR_PACK_INPLACE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook cannot be "
    "modified by in-place operations as this can lead to unexpected side-effects. Please open an issue if you need "
    "to perform in-place operations on the input to a pack hook.")
ERR_HOOKS_SET = ("Calling register_hooks on a saved tensor whose hooks have already been set. Hint: only one pair "
                 "of hooks is allowed at a time.")
ERR_HOOKS_NONE = "Calling register_hooks on a saved tensor with value None is forbidden"
ERR_HOOKS_FREED = (
    "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values of the graph are "
    "freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
    "the graph a second time or if you need to access saved variables after calling backward.")


class SavedTensor:
    """One saved tensor of a node, as `grad_fn._raw_saved_<name>` gives it (torch._C._autograd.SavedTensor)."""

    __slots__ = ("_node", "_key", "_data", "_version", "_grad_fn", "_output_nr", "_requires_grad", "_accumulator",
                 "_unpack_hook", "_packed", "_is_none", "_freed")

    def __init__(self, entry: tuple | None) -> None:
        # A weak reference to the node, set when bound to its node and slot (NOTE [saved tensors]): the node
        # owns its SavedTensors, which must not keep it alive (nor must _grad_fn, OWNER when it is the node).
        self._node: weakref.ref | None = None
        self._key: Any = None
        self._unpack_hook: Callable | None = None
        self._packed: Any = None
        self._freed = False
        self._is_none = entry is None
        if entry is None:
            self._data = self._grad_fn = self._accumulator = None
            self._version = self._output_nr = 0
            self._requires_grad = False
            return
        tensor, self._version, self._grad_fn, self._output_nr = entry
        self._data = tensor
        self._requires_grad = tensor._requires_grad
        self._accumulator = None
        if tensor._requires_grad and tensor.grad_fn is None:  # a leaf: unpacked copies feed its AccumulateGrad
            grad_accumulator(tensor)
            self._accumulator = tensor._grad_accumulator

    # -- the Python API ---------------------------------------------------------------------------------
    def register_hooks(self, *hooks: Any) -> None:
        """Pack this saved tensor now with `pack_hook` and unpack it with `unpack_hook` whenever it is used."""
        if len(hooks) != 2 or not all(callable(h) for h in hooks):
            raise TypeError(_incompatible_arguments(self, hooks))
        if self._unpack_hook is not None:
            raise RuntimeError(ERR_HOOKS_SET)
        if self._is_none:
            raise RuntimeError(ERR_HOOKS_NONE)
        if self._freed:
            raise RuntimeError(ERR_HOOKS_FREED)
        self._set_hooks(hooks[0], hooks[1], self._data.detach())  # the hook gets a detached alias
        self._node()._set_saved(self._key, None)  # the original is no longer kept (the slot is now scratch)

    def unpack(self) -> Tensor | None:
        """The saved tensor, as `_saved_<name>` and backward get it (through the unpack hook if there is one)."""
        if self._is_none:
            return None
        if self._freed:
            raise RuntimeError(ERR_BACKWARD_TWICE)
        if self._unpack_hook is None:
            return unpack_plain(self._node(), self._data, (self._data, self._version, self._history(),
                                                           self._output_nr))
        data = self._unpack_hook(self._packed)
        if not isinstance(data, Tensor):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(data).__name__}")
        if self._grad_fn is None and not self._requires_grad and not data._requires_grad:
            return data  # no history to give it
        var = make_tensor(data._data, device=data._device)
        if self._grad_fn is not None:
            var.grad_fn, var._output_nr, var._requires_grad = self._history(), self._output_nr, True
        else:
            var._requires_grad, var._grad_accumulator = self._requires_grad, self._accumulator
        return var

    @property
    def unpack_hook(self) -> Callable | None:
        """The unpack hook, or None."""
        return self._unpack_hook

    # -- what the node uses -----------------------------------------------------------------------------
    def _history(self) -> Node | None:
        """The saved tensor's grad_fn (its node's own for a saved output)."""
        return self._node() if self._grad_fn is OWNER else self._grad_fn

    def _bind_to(self, node: Node, key: Any) -> None:
        self._node, self._key = weakref.ref(node), key
        if own(self._grad_fn, node):
            self._grad_fn = OWNER

    def _set_hooks(self, pack_hook: Callable, unpack_hook: Callable, given: Tensor) -> None:
        """Call `pack_hook(given)` under no_grad and keep its result; the hook must not write `given` in place."""
        version = version_of(given._data)
        with no_grad():
            packed = pack_hook(given)
        if version_of(given._data) != version:
            raise RuntimeError(ERR_PACK_INPLACE)
        self._unpack_hook, self._packed = unpack_hook, packed

    def _release(self) -> None:
        """Free what was saved (and the hooks), as release_variables does."""
        self._data = self._packed = self._unpack_hook = None
        self._freed = not self._is_none


class SavedRecords:
    """A node's saved tensors once they left the common path (NOTE [saved tensors]): one SavedTensor per slot."""

    __slots__ = ("by_key", "unbound", "early", "held")

    def __init__(self, by_key: dict | None, unbound: list | None = None) -> None:
        self.by_key = by_key
        self.unbound = unbound  # packed by default hooks inside record(), before the node was known
        self.early: tuple = ()  # the slots save_inputs() packed before the kernel, until record() packs the rest
        self.held: tuple = ()  # and until then their leaves' AccumulateGrads, which the node's edges will hold


def _incompatible_arguments(saved: SavedTensor, args: tuple) -> str:
    """pybind11's text for a call with arguments of the wrong kind."""
    given = ", ".join(repr(a) for a in (saved, *args))
    return ("register_hooks(): incompatible function arguments. The following argument types are supported:\n"
            "    1. (self: torch._C._autograd.SavedTensor, arg0: collections.abc.Callable, arg1: "
            "collections.abc.Callable) -> None\n\n"
            f"Invoked with: {given}")


# -- unpacking ----------------------------------------------------------------------------------------------
def unpack_plain(node: Node, tensor: Tensor, entry: tuple | None) -> Tensor:
    """SavedVariable::unpack without hooks: check the version, and give an output back as a new tensor object."""
    if entry is None:
        return tensor
    _, version, grad_fn, output_nr = entry
    check_not_detached(node, tensor, grad_fn)
    now = version_of(tensor._data)
    if now != version:
        raise RuntimeError(modified_in_place(tensor, *unpacked_origin(node, tensor, grad_fn, output_nr), now, version))
    if not own(grad_fn, node):
        return tensor  # an input (or a tensor made inside a custom forward): the object itself
    out = make_tensor(tensor._data, device=tensor._device)
    out.grad_fn, out._output_nr, out._requires_grad = node, output_nr, True
    return out


def _entry_of(tensor: Tensor, entries: list) -> tuple | None:
    """Take the record made for `tensor` out of `entries` (the same tensor may be saved twice: x * x)."""
    for i, entry in enumerate(entries):
        if entry[0] is tensor:
            return entries.pop(i)
    return None


def saved_value(node: Node, key: Any, value: Any) -> Any:
    """`_saved_<key>` of a saved tensor slot holding `value` (a tuple of them for a list of tensors)."""
    records = node._saved_versions
    if records.__class__ is SavedRecords:
        saved = _saved_of_slot(node, key)
        return tuple(s.unpack() for s in saved) if type(saved) is tuple else saved.unpack()
    if value is _FREED:
        raise RuntimeError(ERR_BACKWARD_TWICE)
    entries = list(records or ())
    if type(value) is tuple:
        return tuple(v if v is None else unpack_plain(node, v, _entry_of(v, entries)) for v in value)
    return None if value is None else unpack_plain(node, value, _entry_of(value, entries))


def _saved_of_slot(node: Node, name: str) -> Any:
    """The SavedTensor of a slot, or the tuple of them for a slot holding a list of tensors."""
    by_key = saved_records(node).by_key
    if name in by_key:
        return by_key[name]
    return tuple(saved for key, saved in by_key.items() if type(key) is tuple and key[0] == name)


def unpack_all(node: Node) -> tuple:
    """Every saved tensor of `node`, unpacked in order (a custom Function's `saved_tensors`)."""
    records = node._saved_versions
    if records.__class__ is SavedRecords:
        return tuple(saved.unpack() for saved in saved_records(node).by_key.values())
    entries = list(records or ())
    return tuple(v if v is None else unpack_plain(node, v, _entry_of(v, entries)) for _, v in node._saved_items())


def unpack_into_slots(node: Node) -> None:
    """Before apply: unpack every saved tensor into its slot, in order (the generated code's first lines)."""
    for key, saved in saved_records(node).by_key.items():
        node._set_saved(key, saved.unpack())


def release(node: Node) -> None:
    """Free the SavedTensors of a node off the common path."""
    for saved in saved_records(node).by_key.values():
        saved._release()


# -- leaving the common path ----------------------------------------------------------------------------------
def saved_records(node: Node) -> SavedRecords:
    """The node's SavedRecords, made from its plain records (or bound to its slots) on first use."""
    records = node._saved_versions
    if records.__class__ is SavedRecords:
        if records.unbound is not None:
            _bind(node, records)
        return records
    entries = list(records or ())
    by_key = {key: _saved_tensor(node, key, value, entries) for key, value in node._saved_items()}
    node._saved_versions = out = SavedRecords(by_key)
    return out


def _saved_tensor(node: Node, key: Any, value: Any, entries: list) -> SavedTensor:
    if value is None or value is _FREED:
        saved = SavedTensor(None)
        saved._is_none, saved._freed = value is None, value is _FREED
    else:
        entry = _entry_of(value, entries)
        saved = SavedTensor(entry or (value, version_of(value._data), value.grad_fn, value._output_nr))
    saved._bind_to(node, key)
    return saved


def _bind(node: Node, records: SavedRecords) -> None:
    """Give the SavedTensors packed inside record() their node and slot, matching each slot's tensor in order."""
    unbound, by_key = records.unbound, {}
    for key, value in node._saved_items():
        saved = next((s for s in unbound if s._node is None and s._data is value), None) if value is not None else None
        if saved is None:
            by_key[key] = _saved_tensor(node, key, value, [])
            continue
        saved._bind_to(node, key)
        if saved._unpack_hook is not None:  # packed: the original is no longer kept
            saved._data = None
            node._set_saved(key, None)
        by_key[key] = saved
    records.by_key, records.unbound = by_key, None


# -- default hooks (saved_tensors_hooks) ----------------------------------------------------------------------
def pack_with_default_hooks(entries: tuple) -> SavedRecords:
    """record()'s saving under `saved_tensors_hooks`: pack each tensor, in order, with the innermost pair."""
    pack_hook, unpack_hook = tls.saved_hooks[-1]
    unbound = []
    for entry in entries:
        saved = SavedTensor(entry)
        if not entry[0]._is_wrapped_number:  # a Python number wrapped as a tensor (`x * 2`) is never packed
            saved._set_hooks(pack_hook, unpack_hook, entry[0])  # the hook gets the tensor itself
        unbound.append(saved)
    return SavedRecords(None, unbound)


def save_rest(node: Node, records: SavedRecords) -> SavedRecords:
    """record()'s saving under saved_tensors_hooks, given what is packed so far: the saved tensors save_inputs()
    did not pack (outputs) are packed now, after them, and all are bound to the node's slots."""
    if records.early:
        from ._version import saved_versions

        rest = saved_versions([getattr(node, n, None) for n in node._saved_tensor_names if n not in records.early],
                              node)
        if rest.__class__ is SavedRecords:
            records.unbound.extend(rest.unbound)
        elif rest is not None:  # no hooks in force any more: kept as they are
            records.unbound.extend(SavedTensor(entry) for entry in rest)
        records.early = records.held = ()
    node._saved_versions = records
    _bind(node, records)
    return records


def save_early(node: Node, names: tuple) -> None:
    """save_inputs()'s saving of the slots `names`: the inference-tensor check, and under saved_tensors_hooks the
    packing, before the node has edges: until record() sets them, the saved leaves' AccumulateGrads (which
    SavedTensors reference weakly) are held here."""
    from ._version import saved_versions

    values = [getattr(node, n, None) for n in node._saved_tensor_names if n in names]
    held = tuple(grad_accumulator(v) for v in values
                 if isinstance(v, Tensor) and v._requires_grad and v.grad_fn is None) if tls.saved_hooks else ()
    records = saved_versions(values)
    if records.__class__ is SavedRecords:
        records.early, records.held = names, held
        node._saved_versions = records


def push_default_hooks(pack_hook: Callable, unpack_hook: Callable) -> None:
    """Make (pack_hook, unpack_hook) the hooks of tensors saved on this thread until the matching pop."""
    if tls.saved_hooks_disabled is not None:
        raise RuntimeError(tls.saved_hooks_disabled)
    _state.saved_hooks_seen = True
    tls.saved_hooks = (*tls.saved_hooks, (pack_hook, unpack_hook))


def pop_default_hooks() -> None:
    """Undo the last push_default_hooks of this thread."""
    tls.saved_hooks = tls.saved_hooks[:-1]


def disable_default_hooks(message: str | None) -> None:
    """Refuse saved-tensor hooks on this thread with `message` (None allows them again). Refusing them while some
    are pushed raises at once: hooks in force are never switched off under a tensor being saved."""
    tls.saved_hooks_disabled = message
    if message is not None and tls.saved_hooks:
        raise RuntimeError(message)


# -- non-tensor saved values ----------------------------------------------------------------------------------
def torch_value(value: Any, is_int64: bool) -> Any:
    """A saved argument as PyTorch's getter returns it: lists as tuples, and an int64 argument's negative values
    as the unsigned number of the same bits (its getter converts them so: `dim=-1` reads 18446744073709551615)."""
    if isinstance(value, (list, tuple)):
        return tuple(torch_value(v, is_int64) for v in value)
    if isinstance(value, np.generic):
        value = value.item()
    if is_int64 and isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return value + _INT64_WRAP
    return value


_MISSING = object()


def saved_attribute(node: Node, attr: str) -> Any:
    """`_saved_<name>` / `_raw_saved_<name>`, or _MISSING when the node's class saves no such value."""
    raw = attr.startswith("_raw_saved_")
    key = attr[len("_raw_saved_"):] if raw else attr[len("_saved_"):]
    cls = type(node)
    if key in cls._saved_tensor_names:
        if raw:
            return _saved_of_slot(node, key)
        return saved_value(node, key, getattr(node, key, None))
    if not raw and key in cls._saved_values:
        return torch_value(getattr(node, key, None), key in cls._saved_int64)
    return _MISSING
