"""The Tensor: a numpy array with PyTorch's autograd attributes and a torch-compatible method set.

Arithmetic and shape methods delegate to `_ops`.
"""
from __future__ import annotations

import warnings
import weakref
from typing import Any, Callable

import numpy as np

from . import _observer, _state, _views
from ._dispatch import public
from ._dtype import Size, c_type_name, dtype, from_numpy_dtype
from ._layout import is_non_overlapping_and_dense
from ._node import AccumulateGrad, Node, RemovableHandle, _HookDict, add_hook
from ._state import tls
from ._version import bump, set_version, version_of, with_own_counter


class Tensor:
    """An n-dimensional array that records the operations applied to it when it requires grad."""

    __slots__ = (
        "_data", "_requires_grad", "_grad_fn", "_output_nr", "_grad", "_grad_accumulator",
        "_backward_hooks", "_post_acc_hooks", "_retains_grad", "_device", "_is_wrapped_number", "_inference",
        "_view",  # a ViewInfo (engine/_views.py) for the output of a view op, else None
        "_uid",  # set only when an observer asks (engine/_observer.tensor_uid), never by init_tensor
        "__weakref__", "__dict__",
    )
    __array_priority__ = 1000  # numpy scalars on the left defer to our reflected operators
    _zerotensor = False
    _counted_inference = False  # see _counted_if_inference; per instance (in __dict__) like _zerotensor
    """torch's ZeroTensor: an immutable zero that `sgn`'s formula returns; set per instance (in __dict__) on the
    rare tensors that are one, so the common tensor pays nothing."""

    def __init__(self, *args: Any) -> None:
        """torch's legacy constructor: `Tensor(sizes...)` (zeros here, uninitialised in torch) or `Tensor(data)`,
        float32 either way."""
        if args and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
            arr = np.zeros(tuple(int(a) for a in args), dtype=np.float32)
        elif len(args) > 1:
            raise TypeError(f"new(): invalid data type '{type(args[0]).__name__}'")
        else:
            arr = np.asarray([] if not args or args[0] is None else args[0], dtype=np.float32)
        init_tensor(self, arr)

    # -- autograd attributes ------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether this tensor records history (a leaf flag, a grad_fn, or a base that requires grad)."""
        return self._requires_grad or (self._view is not None and self._view.base._requires_grad)

    @property
    def grad_fn(self) -> Node | None:
        """The node that made this tensor; a view written in place since gets a fresh one here."""
        if self._view is None:
            return self._grad_fn
        return _views.view_grad_fn(self)

    @grad_fn.setter
    def grad_fn(self, node: Node | None) -> None:
        self._grad_fn = node
        if self._view is not None:
            self._view.attr_version = version_of(self._data)

    @property
    def _base(self) -> Tensor | None:
        """The tensor this one is a view of (the root of a chain of views), or None."""
        return None if self._view is None else self._view.base

    def _is_view(self) -> bool:
        """Whether this tensor is the output of a view op."""
        return self._view is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set the leaf's requires_grad flag in place; returns self."""
        # torch's C++ is_leaf() reads the stored grad_fn: a stale view is not regenerated here (which could raise
        # the no_grad-view error), and one made under no_grad is a leaf until its grad_fn is read
        if self._grad_fn is not None:
            if not requires_grad:
                raise RuntimeError(
                    "you can only change requires_grad flags of leaf variables. If you want to use a "
                    "computed variable in a subgraph that doesn't require differentiation use "
                    "var_no_grad = var.detach().")
            return self
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and self._inference and not tls.inference_mode:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        """True for tensors with no grad_fn: user-made tensors and those that do not require grad."""
        return self.grad_fn is None

    @property
    def grad(self) -> Tensor | None:
        """The accumulated gradient; None until a backward writes it."""
        # torch's C++ is_leaf() reads the stored grad_fn: a stale view is not regenerated (no seq_nr taken) here
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
                ".grad attribute won't be populated during autograd.backward(). If you indeed want "
                "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
                "non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
                "the leaf Tensor instead.", UserWarning, stacklevel=2)
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of size "
                    f"'{list(self.shape)}'. Please ensure that the gradient and the tensor are the same size")
            if value.dtype is not self.dtype:
                raise RuntimeError(
                    f"attempting to assign a gradient with dtype '{c_type_name(value)}' to a tensor with dtype "
                    f"'{c_type_name(self)}'. Please ensure that the gradient and the tensor have the same dtype")
        self._grad = value

    @property
    def retains_grad(self) -> bool:
        """True for a non-leaf on which retain_grad() was called."""
        return self._retains_grad

    @property
    def output_nr(self) -> int:
        """Which output of its grad_fn this tensor is."""
        return self._output_nr

    @property
    def _version(self) -> int:
        """How many in-place writes the tensor's memory has had (shared with its views and detach()es)."""
        if self._inference and not self._counted_inference:
            raise RuntimeError("Inference tensors do not track version counter.")
        return version_of(self._data)

    def is_inference(self) -> bool:
        """Whether this is an inference tensor: made inside inference_mode, or a view of one."""
        return self._inference

    def retain_grad(self) -> None:
        """Make a non-leaf's `.grad` populated by backward (a no-op on leaves, engine-semantics §7.4)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is None or self._retains_grad:  # torch's is_leaf(): the stored grad_fn, so a view made
            return  # under no_grad stays a leaf here even when its base was written since
        grad_fn = self.grad_fn
        if grad_fn._retains_grad_hooks is None:
            grad_fn._retains_grad_hooks = {}
        grad_fn._retains_grad_hooks[self._output_nr] = weakref.ref(self)
        self._retains_grad = True

    def register_hook(self, hook: Callable) -> RemovableHandle:
        """Run `hook(grad) -> Tensor | None` when the gradient w.r.t. this tensor is computed."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._backward_hooks is None:
            self._backward_hooks = _HookDict()
            if self.grad_fn is not None:
                self.grad_fn._register_hook_dict(self)
        return add_hook(self._backward_hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable) -> RemovableHandle:
        """Run `hook(tensor)` after AccumulateGrad wrote this leaf's `.grad`."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = _HookDict()
        return add_hook(self._post_acc_hooks, hook)

    def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                 create_graph: bool = False, inputs: Any = None) -> None:
        """Compute the gradient of this tensor w.r.t. graph leaves (see `autograd.backward`)."""
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    @public("detach", tensor=True)
    def detach(self) -> Tensor:
        """A new tensor sharing data, cut from the graph."""
        return _counted_if_inference(alias_tensor(self._data, self))

    @public("detach_", tensor=True)
    def detach_(self) -> Tensor:
        """Cut this tensor from the graph in place (measured on torch 2.13: inside inference_mode, nothing)."""
        if tls.inference_mode:
            return self
        if self._view is not None:
            raise RuntimeError(
                "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel (DDP) for "
                "training, and gradient_as_bucket_view is set as True, gradients are views of DDP buckets, and hence "
                "detach_() cannot be called on these gradients. To fix this error, please refer to the "
                "Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.")
        if self._grad_fn is not None:
            _state.detached_in_place = True  # saved tensors are now checked for it (engine/_node.unpacked_origin)
        self._grad_fn = None
        self._requires_grad = False
        self._output_nr = 0
        return self

    # -- data access --------------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        """The shape, as a torch.Size."""
        return Size(self._data.shape)

    def size(self, dim: int | None = None) -> Size | int:
        """The shape, or its extent along `dim`."""
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim)]

    @property
    def dtype(self) -> dtype:
        """The element type."""
        return from_numpy_dtype(self._data.dtype)

    @property
    def device(self) -> Any:
        """The device label (`cpu`, `cuda:0`, ...)."""
        from ._device import device as device_cls

        return device_cls(self._device)

    @property
    def is_cuda(self) -> bool:
        return self._device.startswith("cuda")

    @property
    def is_xpu(self) -> bool:
        return False  # the engine's devices are cpu, cuda:N and meta

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    def dim(self) -> int:
        """Number of dimensions."""
        return self._data.ndim

    def nelement(self) -> int:
        """numel()."""
        return self._data.size

    def numel(self) -> int:
        """Number of elements."""
        return int(self._data.size)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def is_contiguous(self) -> bool:
        """Row-major contiguity, as numpy's flag reports it."""
        return bool(self._data.flags.c_contiguous)

    def is_floating_point(self) -> bool:
        """Whether the dtype is float32 or float64."""
        return self.dtype.is_floating_point

    def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
        """Strides in elements."""
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        return strides if dim is None else strides[_wrap_dim(dim, self._data.ndim)]

    def _is_zerotensor(self) -> bool:
        """Whether this is an immutable ZeroTensor (what torch's formulas return for an identically zero grad)."""
        return self._zerotensor

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (shares memory); refuses tensors that require grad, like torch."""
        if self._zerotensor:
            raise RuntimeError(" Cannot convert a ZeroTensor to numpy. Set force=True if you need the zero array.")
        if self._requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        return self._data

    def item(self) -> float | int | bool:
        """The single value of a one-element tensor, as a Python number."""
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        """The data as (nested) Python lists."""
        if self._zerotensor:
            raise RuntimeError("tolist() shouldn't be called on a tensor with unallocated storage")
        return self._data.tolist()

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()).item())

    def __index__(self) -> int:
        if self.dtype.is_floating_point or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        from ._ops import unbind

        return iter(unbind(self, 0))  # torch's __iter__: one UnbindBackward0 for all rows

    @public("data", tensor_property=True)
    def data(self) -> Tensor:
        """The same memory as a tensor with no history and its own version counter (unlike detach()); assigning
        `.data` is not supported."""
        return _counted_if_inference(alias_tensor(with_own_counter(self._data), self))

    @public("to", tensor="type_as")
    def type_as(self, other: Tensor) -> Tensor:
        """self.to(other.dtype)."""
        return self.to(other.dtype)

    def _set_data(self, value: Tensor) -> None:
        """`t.data = value`: t now views value's memory, keeping its own version counter (torch's set_data), and
        takes its shape and dtype; no node is made."""
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        arr = with_own_counter(value._data)
        set_version(arr, version_of(self._data))
        self._data = arr
        self._device = value._device

    def __repr__(self) -> str:
        return _format_tensor(self)

    def __format__(self, spec: str) -> str:
        # torch formats a 0-dim tensor as its number (`f"{loss:.4f}"`), anything else as object does
        if self._data.ndim == 0 and type(self) is Tensor:
            return self.item().__format__(spec)
        return object.__format__(self, spec)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._data if dtype is None else self._data.astype(dtype)

    def __reduce_ex__(self, protocol: int):
        raise TypeError("engine tensors cannot be pickled")

    def __deepcopy__(self, memo: dict) -> Tensor:
        if self.grad_fn is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the "
                               "deepcopy protocol at the moment.")
        out = make_tensor(self._data.copy(), self._requires_grad, self._device)
        if self._grad is not None:
            out._grad = make_tensor(self._grad._data.copy(), device=self._device)
        return out


def init_tensor(t: Tensor, arr: np.ndarray, requires_grad: bool = False, device: str = "cpu") -> None:
    """Fill every slot of a new Tensor (make_tensor repeats the list inline: keep the two in step)."""
    t._data = arr
    t._requires_grad = requires_grad
    t._grad_fn = None
    t._view = None
    t._output_nr = 0
    t._grad = None
    t._grad_accumulator = None
    t._backward_hooks = None
    t._post_acc_hooks = None
    t._retains_grad = False
    t._device = device
    t._is_wrapped_number = False
    t._inference = _state.inference_seen and tls.inference_mode


def alias_tensor(arr: np.ndarray, of: Tensor) -> Tensor:
    """A tensor on `of`'s device holding `arr`, a view of `of`'s memory: an inference tensor iff `of` is one
    (a view of a normal tensor made inside inference_mode stays normal, as in torch)."""
    t = make_tensor(arr, device=of._device)
    t._inference = of._inference
    if of._zerotensor:
        t._zerotensor = True
    return t


def _counted_if_inference(t: Tensor) -> Tensor:
    """detach() and .data of an inference tensor, taken outside inference_mode, are still inference tensors,
    yet torch gives them a version counter and lets them be written in place (measured on torch 2.13)."""
    if t._inference and not tls.inference_mode:
        t._counted_inference = True
    return t


_new = object.__new__


def make_tensor(arr: np.ndarray, requires_grad: bool = False, device: str = "cpu") -> Tensor:
    """Wrap a numpy array the engine made (already of a supported dtype) without copying."""
    t = _new(Tensor)
    # init_tensor(t, arr, requires_grad, device), inline: every op result comes here. Keep the two in step.
    t._data = arr
    t._requires_grad = requires_grad
    t._grad_fn = None
    t._view = None
    t._output_nr = 0
    t._grad = None
    t._grad_accumulator = None
    t._backward_hooks = None
    t._post_acc_hooks = None
    t._retains_grad = False
    t._device = device
    t._is_wrapped_number = False
    t._inference = _state.inference_seen and tls.inference_mode
    return t


def _coerce_array(arr: np.ndarray) -> np.ndarray:
    """Bring an array to one of the engine's dtypes, as torch.tensor does with Python data."""
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize == 8 or arr.dtype.itemsize == 4 or arr.dtype.itemsize == 2:
            return arr
        return arr.astype(np.float32)
    if kind in "iu":
        return arr if arr.dtype == np.int64 or arr.dtype == np.int32 else arr.astype(np.int64)
    if kind == "b":
        return arr
    raise TypeError(f"can't convert np.ndarray of type {arr.dtype}. The only supported types are: "
                    "float64, float32, int64 and bool.")


def _wrap_dim(dim: int, ndim: int) -> int:
    """Normalise a possibly negative dim, with PyTorch's IndexError text."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim + n if dim < 0 else dim


def gradient_edge(t: Tensor) -> tuple:
    """The edge a gradient w.r.t. `t` flows along: (grad_fn, output_nr) or (AccumulateGrad, 0)."""
    node = t._grad_fn if t._view is None else _views.view_grad_fn(t)
    if node is not None:
        return (node, t._output_nr)
    if t._requires_grad:
        return (grad_accumulator(t), 0)
    return (None, 0)


def grad_accumulator(t: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad, made on first use and cached by weak reference (engine-semantics §8.1)."""
    ref = t._grad_accumulator
    acc = ref() if ref is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._grad_accumulator = weakref.ref(acc)
        if _observer.observers:
            _observer.notify("node_created", acc)
    return acc


def try_get_grad_accumulator(t: Tensor) -> AccumulateGrad | None:
    """The leaf's AccumulateGrad if it exists, without creating one."""
    ref = t._grad_accumulator
    return ref() if ref is not None else None


ERR_ZEROTENSOR_IMMUTABLE = ("ZeroTensors are immutable. Please use the materialized zero tensor obtained using "
                            ".clone() if you want a mutable tensor.")


def accumulate_into_grad(variable: Tensor, new_grad: Tensor, unreferenced: bool = False) -> None:
    """AccumulateGrad's update of `variable.grad` (engine-semantics §8.2).

    With no `.grad` yet, torch adopts (steals) the incoming grad, sharing its memory, when grad mode is off,
    nothing else references it (`unreferenced`, the caller's use_count test) and its strides obey the layout
    contract; otherwise it clones (recording CopyBackwards under grad mode when the grad requires grad).
    """
    old = variable._grad
    if old is None:
        data, vdata = new_grad._data, variable._data
        if not tls.grad_enabled and unreferenced and (
                # _obeys_layout_contract's common case first, inline: equal strides, none 0, of a C-ordered leaf
                data.strides == vdata.strides and data.shape == vdata.shape and data.dtype == vdata.dtype
                and 0 not in data.strides and data.flags.writeable and vdata.flags.c_contiguous
                or _obeys_layout_contract(data, vdata)):
            # new_grad.detach(): alias_tensor(new_grad._data, new_grad), inline (every leaf's first grad)
            grad = make_tensor(new_grad._data, False, new_grad._device)
            grad._inference = new_grad._inference
            if new_grad._zerotensor:
                grad._zerotensor = True
            variable._grad = grad
        elif not is_non_overlapping_and_dense(variable._data):
            from ._ops import clone  # torch's clone_obey_contract falls back to a contiguous clone

            variable._grad = clone(new_grad, contiguous=True)
        elif not tls.grad_enabled or not new_grad._requires_grad:
            # clone_obey_contract: new_empty_strided(the variable's sizes and strides).copy_(new_grad); the copy_
            # counts a version
            data = np.empty_like(variable._data, dtype=new_grad._data.dtype)  # order "K": the variable's strides
            np.copyto(data, new_grad._data)
            variable._grad = make_tensor(data, device=new_grad._device)
            bump(data)
        else:
            from ._ops import copy_to_new

            variable._grad = copy_to_new(new_grad, variable)
    elif not tls.grad_enabled:
        if old._zerotensor:  # torch's in-place += refuses it, so a second backward fails
            raise RuntimeError(ERR_ZEROTENSOR_IMMUTABLE)
        np.add(old._data, new_grad._data, out=old._data, casting="unsafe")
        bump(old._data)  # torch's `variable_grad += new_grad`: an in-place op, one more version
    else:
        from ._ops import add

        variable._grad = add(old, new_grad)  # not `old + new_grad`: the engine's own op, not the user's


def _obeys_layout_contract(grad: np.ndarray, variable: np.ndarray) -> bool:
    """utils::obeys_layout_contract: the grad's strides are the variable's on every dim of size > 1.

    A read-only array (a broadcast) is never adopted: the accumulation that follows writes into it.
    """
    if grad.shape != variable.shape or grad.dtype != variable.dtype or not grad.flags.writeable:
        return False
    flags = variable.flags  # a new flags object per read of .flags
    if not (flags.c_contiguous or flags.f_contiguous):
        return bool(grad.flags.c_contiguous)
    strides = grad.strides
    if strides == variable.strides and 0 not in strides:  # the common case, without the loop
        return True
    # a size-1 dim's stride does not matter, unless it is 0: such a grad is a view (an expand's), never adopted
    return all((a == b) if n != 1 else (a != 0)
               for n, a, b in zip(grad.shape, grad.strides, variable.strides, strict=True))


def _format_tensor(t: Tensor) -> str:
    arr = t._data
    kwargs = {"separator": ", ", "prefix": "tensor("}
    if arr.dtype.kind == "f":
        finite = arr[np.isfinite(arr)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        # torch prints 4 decimals unless every value is whole (then "3."); numpy would trim zeros
        body = np.array2string(arr, precision=4, floatmode="maxprec_equal" if integral else "fixed", **kwargs)
    elif arr.dtype == np.bool_:  # torch pads True to False's width only when a False is printed
        width = 5 if arr.size and not arr.all() else 4
        body = np.array2string(arr, formatter={"bool": lambda v: str(bool(v)).rjust(width)}, **kwargs)
    else:
        body = np.array2string(arr, **kwargs)
    extras = []
    if arr.dtype == np.float64 or arr.dtype == np.float16:
        extras.append(f"dtype=torch.{arr.dtype}")
    elif arr.dtype == np.int64 and arr.size == 0:
        extras.append("dtype=torch.int64")
    if t._device != "cpu":
        extras.append(f"device='{t._device}'")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{type(t.grad_fn).__name__}>")  # torch prints the class name
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"
