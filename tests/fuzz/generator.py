"""Random programs over the engine's surface, from a seed: `generate(seed, known_gaps=True)`.

The generator keeps an abstract state of every variable (shape, dtype, requires_grad, history, view base,
in-place writes, which leaves its graph reaches) so that most statements are valid, values stay well
conditioned (log, sqrt, division and reciprocal only see positive tensors), and everyday code (arithmetic,
matmul, activations, sums, backward, optimizer steps, `h += 1`, `x[0]`) is drawn most often. Statements
are still allowed to fail: an error is compared like any other event.

The same seed gives the same program (numpy's default_rng, no hash() or id()). With `known_gaps=False`
the constructs listed in KNOWN_GAPS (engine differences still open) are never drawn.

Imports numpy and the standard library only: no engine, no torch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from tests.fuzz.program import Program, Stmt

KNOWN_GAPS: dict[str, str] = {}
"""Constructs the engine still gets wrong, each with what differs. `known_gaps=False` leaves them out; delete an
entry when its class is fixed, and the fixed batch covers it again."""

DELIBERATE: dict[str, str] = {
    "kernel_version": "the _version of a result computed outside inference_mode from inference tensors: torch "
                      "counts in-place calls made inside its C++ kernels there (sum 1, mean 2, mse_loss 2, clone 1, "
                      "most pointwise ops 0); the engine gives 0. Never compared (docs/engine-semantics.md §17.3). "
                      "Where such a kernel runs with out= (abs) on an inference tensor that requires grad, torch's "
                      "error is the out= one, the engine's the saved-inference-tensor one: only the type is compared",
    "inference_requires_grad": "an inference tensor that requires grad, used outside inference_mode: what torch "
                               "does depends on each C++ kernel (neg, sum, exp give results without history, "
                               "x * 2 and clone record a node, mean and abs raise the out= error); the engine "
                               "records as for any tensor. Never drawn",
    "self_overlap": "an in-place op reading a tensor that shares the written memory in a way torch's overlap check "
                    "gives up on (TOO_HARD: a row of a transposed tensor added to it): torch's result depends on "
                    "the order its loop writes and reads the shared elements; the engine reads the values from "
                    "before the write. Never drawn (where torch's check does refuse, the engine refuses alike: "
                    "tests/engine/parity_views.py)",
    "overload_type_error": "an overloaded op (where, pow, lt, eq, masked_fill) given a non-tensor: torch's parser "
                           "lists every overload in a multi-line TypeError; the engine raises a one-line one. The "
                           "type is compared, not the text (interpret._deliberately_same)",
}
"""Differences kept on purpose, each listed in docs/engine-semantics.md §17.3: the generator never compares what
they touch."""

ABSENT: dict[str, str] = {
    "torch_bug": "a program on which torch 2.13 fails its own internal assert ('INTERNAL ASSERT FAILED ... please "
                 "report a bug to PyTorch', e.g. an in-place op on a retain_grad()ed output of a custom Function): "
                 "compared up to there (interpret._torch_bug)",
    "stale_view_hook": "register_hook on a view whose base was written in place since: torch 2.13 itself "
                       "segfaults (Tensor.register_hook), so the program cannot be compared",
    "third_order": "a third-order graph through layer_norm, log_sigmoid, nll_loss, binary_cross_entropy(_with_logits), "
                   "smooth_l1_loss or huber_loss: their second-order nodes compute in numpy and refuse create_graph "
                   "with NotImplementedError (engine/_ops/nn_extra.py, losses.py); a program stops being compared "
                   "there (interpret._refused_on_purpose)",
    "conv_create_graph": "create_graph through a (transposed) convolution: torch records ConvolutionBackwardBackward0, "
                         "which the engine refuses with NotImplementedError (engine/_ops/conv.py); a program stops "
                         "being compared there (interpret._refused_on_purpose)",
    "refused_inplace": "Tensor.pow_, exp_, neg_, sigmoid_, tanh_, abs_, sqrt_, clamp_, t_ and unsqueeze_ "
                       "raise NotImplementedError on purpose (engine/_inplace.py)",
}
"""Surface the engine refuses on purpose (not a wrong answer): never drawn, whatever `known_gaps` says.
engine.add, sub, mul and div do not exist either (only the Tensor methods), so no template calls them.
Delete an entry when the engine gains the surface."""

FLOAT = ("f64",)
"""The dtype values flow through. float32 rounding differs between numpy and torch by more than the parity
tolerance over a few ops, so float32 appears only where its semantics are the point (mixed-dtype matmul,
`.float()`), and such tensors are not read again."""
_DATA_SHAPES = [(3,), (2, 3), (3, 2), (4,), (), (2, 1, 3), (1, 3), (2, 3, 4), (3, 3)]
_SHAPE_WEIGHTS = [5, 6, 2, 2, 1, 1, 1, 1, 1]


@dataclass
class Var:
    """What the generator believes about one variable."""

    name: str
    shape: tuple[int, ...] | None  # None: depends on the data (a masked selection)
    dtype: str  # f64, f32, i64, b; or module / optim / handle / none
    rg: bool = False
    leaf: bool = True
    positive: bool = False
    root: str = ""  # the variable owning the storage (itself unless a view or an alias)
    maybe_root: str = ""  # the storage a reshape of a tensor of unknown layout may view (torch decides by strides)
    view: bool = False  # an autograd view of root (detach() and .data share storage without being views)
    contiguous: bool = True
    expanded: bool = False  # made by expand, or a view of such
    writes: int = 0  # in-place writes to the storage, counted on the root
    saw: dict[str, int] = field(default_factory=dict)  # storage -> its writes when this graph read it
    anc: frozenset[str] = frozenset()  # variables that require grad which its graph reaches
    has_grad: bool = False
    made_in: int = 0
    fake_view: bool = False  # a new tensor PyTorch does not make a view (where, matmul, indexing...)
    indexed: bool = False  # made by advanced indexing (IndexBackward0)
    spent: bool = False  # its graph was probably freed by a backward without retain_graph
    inference: bool = False  # an inference tensor
    grad_rg: bool = False  # a leaf whose .grad has history (made by create_graph)
    grad_alias: bool = False  # a gradient made by backward, or a view of one (its _version is backward's)
    kernel_version: bool = False  # read from an inference tensor outside inference_mode: see DELIBERATE
    noisy: bool = False  # values that tie exactly but for rounding (a layer_norm's means): argmax would be noise
    grad_noisy: bool = False  # a leaf whose .grad came from a noisy root
    big: bool = False  # may hold huge values (exp of a sum): sin/cos of those are rounding noise
    read: bool = False  # some statement read it (so a graph may have saved it)
    info: dict = field(default_factory=dict)  # a module's or optimizer's shape and parameters

    @property
    def is_view(self) -> bool:
        return self.view

    @property
    def tensor(self) -> bool:
        return self.dtype in ("f64", "f32", "i64", "b")

    @property
    def history(self) -> bool:
        return self.rg and not self.leaf


@dataclass
class _State:
    rng: np.random.Generator
    known_gaps: bool
    stmts: list[Stmt] = field(default_factory=list)
    vars: dict[str, Var] = field(default_factory=dict)
    counter: int = 0
    mode: str | None = None  # the grad mode of the statement being drawn
    notes: set[str] = field(default_factory=set)


def generate(seed: int, known_gaps: bool = True, size: int | None = None) -> Program:
    """The program of `seed`: 1-3 leaves, then about 8-30 statements drawn by KIND_WEIGHTS."""
    g = Generator(np.random.default_rng(seed), known_gaps)
    return g.program(seed, size)


class Generator:
    """Draws statements into a program, keeping the abstract state of its variables."""

    def __init__(self, rng: np.random.Generator, known_gaps: bool) -> None:
        self.s = _State(rng, known_gaps)
        self.rng = rng

    # -- the program ---------------------------------------------------------------------------------
    def program(self, seed: int, size: int | None) -> Program:
        n = size if size is not None else int(self.rng.integers(8, 31))
        for _ in range(int(self.rng.integers(1, 4))):
            self.leaf()
        kinds = list(KIND_WEIGHTS)
        weights = np.array([KIND_WEIGHTS[k] for k in kinds], dtype=float)
        while len(self.s.stmts) < n:
            kind = kinds[int(self.rng.choice(len(kinds), p=weights / weights.sum()))]
            self.s.mode = self._draw_mode(kind)
            DRAW[kind](self)
            self.s.mode = None
        return Program(seed, tuple(self.s.stmts), notes=tuple(sorted(self.s.notes)))

    def _draw_mode(self, kind: str) -> str | None:
        if kind in ("backward", "grad", "optim", "hook", "leaf", "module", "layer"):
            return None
        r = self.rng.random()
        return "no_grad" if r < 0.08 else "inference_mode" if r < 0.09 else None

    # -- helpers -------------------------------------------------------------------------------------
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick_item(self, items: list):
        return items[int(self.rng.integers(len(items)))]

    def weighted(self, table: dict):
        keys = list(table)
        w = np.array([table[k] for k in keys], dtype=float)
        return keys[int(self.rng.choice(len(keys), p=w / w.sum()))]

    def allow(self, construct: str) -> bool:
        """May the program use a known-gap construct? Records it when it does. ABSENT and DELIBERATE ones: never."""
        if construct in ABSENT or construct in DELIBERATE or (not self.s.known_gaps and construct in KNOWN_GAPS):
            return False
        self.s.notes.add(construct)
        return True

    def fresh(self, prefix: str = "v") -> str:
        self.s.counter += 1
        return f"{prefix}{self.s.counter}"

    def usable(self, v: Var) -> bool:
        """Whether `v` may be read here: a tensor, but not an inference tensor that requires grad outside
        inference_mode (DELIBERATE["inference_requires_grad"])."""
        if not v.tensor:
            return False
        return not (v.inference and v.rg and self.s.mode != "inference_mode")

    def note_reads(self, *vs: Var) -> None:
        for v in vs:
            v.read = True

    def may_write(self, x: Var, src: Var | None = None) -> bool:
        """Whether an in-place write to `x` (reading `src`) stays clear of the known gaps it may touch; it
        notes the constructs it uses."""
        root = self.s.vars[x.root]
        tracked = x.rg or root.rg or (src is not None and src.rg and self.s.mode is None)
        checks = [(x.is_view and tracked, "inplace_on_view"),
                  (x.grad_alias, "grad_layout"),
                  (x.fake_view and tracked and self.s.mode is None, "inplace_on_false_view"),
                  (x.expanded, "write_expanded"),
                  (src is not None and src.root == x.root and src is not x, "self_overlap"),
                  (any(v.is_view and v is not x and v.root == root.name and (v.rg or tracked)
                       for v in self.s.vars.values()), "stale_view")]
        return all(self.allow(name) for hit, name in checks if hit)

    def alias(self, x: Var) -> Var:
        """x.detach() or x.data: the same storage and layout, no history."""
        return Var(self.fresh(), x.shape, x.dtype, positive=x.positive, root=x.root, contiguous=x.contiguous,
                   expanded=x.expanded, saw=dict(x.saw), inference=x.inference, grad_alias=x.grad_alias,
                   kernel_version=x.kernel_version)

    def wrote(self, x: Var) -> None:
        """Count an in-place write to `x`'s storage."""
        self.s.vars[x.root].writes += 1

    def modified(self, v: Var) -> bool:
        """Whether a storage `v`'s graph read has been written since (backward may find it modified)."""
        return any(r in self.s.vars and self.s.vars[r].writes > n for r, n in v.saw.items())

    def pick(self, pred: Callable[[Var], bool] = lambda v: True, recent: bool = True) -> Var | None:
        """A variable satisfying `pred`, recent ones likelier."""
        cands = [v for v in self.s.vars.values() if self.usable(v) and pred(v)]
        if not cands:
            return None
        w = np.array([(1.0 + (v.made_in if recent else 0)) * (0.3 if v.spent else 1.0) for v in cands]) ** 2
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def pick_float(self, pred: Callable[[Var], bool] = lambda v: True, make_positive: bool = False) -> Var:
        """A float tensor satisfying `pred`, made as a new leaf (positive if asked) if none exists."""
        v = self.pick(lambda v: v.dtype in FLOAT and v.shape is not None and pred(v))
        return v if v is not None else self.leaf(positive=True if make_positive else None)

    def emit(self, kind: str, op: str, text: str, ins: list[Var], outs: list[Var], *, made: tuple | None = None,
             grad_of: tuple = (), data=None, helper: str | None = None, anomaly: bool = False,
             mode: str | None = "inherit") -> Stmt:
        """Append a statement reading `ins` and defining `outs` (their tensors recorded by p.made)."""
        self.note_reads(*ins)
        if made is None:
            made = tuple(f"{{out{k}}}" for k, o in enumerate(outs) if o.tensor)
        made, quiet = self._split_made(made, ins, outs)
        stmt = Stmt(kind, op, text, tuple(v.name for v in ins), tuple(v.name for v in outs),
                    tuple(_type(v) for v in outs), made, quiet, grad_of, data,
                    self.s.mode if mode == "inherit" else mode, anomaly, helper)
        self.s.stmts.append(stmt)
        for v in outs:
            v.made_in = len(self.s.stmts)
            v.inference = v.inference or (stmt.mode == "inference_mode" and v.tensor and not v.view)
            if not v.root:
                v.root = v.name
            self.s.vars[v.name] = v
        return stmt

    def _split_made(self, made: tuple, ins: list[Var], outs: list[Var]) -> tuple[tuple, tuple]:
        """Move tensors whose `_version` is a known gap (aliases of a gradient) or a deliberate difference
        (`kernel_version`) to `quiet`."""
        by_template = {f"{{out{k}}}": v for k, v in enumerate(outs)} | {f"{{{k}}}": v for k, v in enumerate(ins)}
        def gap(m: str) -> bool:
            return (m.endswith(".grad") or getattr(by_template.get(m), "grad_alias", False)) \
                and not self.allow("grad_version")
        quiet = tuple(m for m in made if getattr(by_template.get(m), "kernel_version", False) or gap(m))
        return tuple(m for m in made if m not in quiet), quiet

    def derived(self, shape, dtype: str, *ins: Var, positive: bool = False, view_of: Var | None = None,
                saves_output: bool = False) -> Var:
        """The abstract result of an op on `ins`: grad and history follow the grad mode; the storages it read
        (and its own, when the op saves its output) are remembered for `modified`."""
        rg = any(v.rg for v in ins) and dtype in FLOAT and self.s.mode is None
        anc = frozenset().union(*(v.anc | ({v.name} if v.rg else set()) for v in ins)) if rg else frozenset()
        v = Var(self.fresh(), shape, dtype, rg=rg, leaf=not rg, positive=positive, anc=anc)
        # a view of an inference tensor is one in any mode; inside inference_mode, so is every new tensor
        v.inference = (view_of is not None and view_of.inference) or (
            self.s.mode == "inference_mode" and (view_of is None or view_of.inference))
        v.kernel_version = (not v.inference and self.s.mode != "inference_mode" and any(i.inference for i in ins)) \
            or (view_of is not None and view_of.kernel_version)
        v.noisy = any(i.noisy for i in ins)
        v.big = any(i.big for i in ins)
        v.contiguous = all(i.contiguous for i in ins)  # results of a strided input may keep its layout
        for i in ins:
            v.saw.update({r: n for r, n in i.saw.items() if n < v.saw.get(r, n + 1)})
            v.saw.setdefault(i.root, self.s.vars[i.root].writes if i.root in self.s.vars else 0)
        if saves_output:
            v.saw[v.name] = 0
        if view_of is not None:
            v.root, v.view, v.maybe_root = view_of.root, True, view_of.maybe_root
            v.expanded, v.grad_alias = view_of.expanded, view_of.grad_alias
            if view_of.rg and self.s.mode:
                v.rg, v.leaf, v.anc = True, False, view_of.anc | {view_of.name}
        return v

    # -- leaves --------------------------------------------------------------------------------------
    def leaf(self, shape: tuple[int, ...] | None = None, positive: bool | None = None,
             rg: bool | None = None, dtype: str | None = None) -> Var:
        """A new leaf (or a constant that does not require grad) with written-out values."""
        if shape is None:
            shape = _DATA_SHAPES[int(self.rng.choice(len(_DATA_SHAPES), p=_norm(_SHAPE_WEIGHTS)))]
        positive = self.chance(0.3) if positive is None else positive
        rg = self.chance(0.8) if rg is None else rg
        dtype = dtype or "f64"
        data = values(self.rng, shape, positive)
        name = self.fresh()
        args = ("" if rg else ", requires_grad=False") + (', dtype="float32"' if dtype == "f32" else "")
        v = Var(name, shape, dtype, rg=rg, leaf=True, positive=positive)
        self.emit("leaf", "leaf", f'{{out0}} = p.leaf("{{out0}}", {{data}}{args})', [], [v], data=data,
                  grad_of=("{out0}",) if rg else (), made=(), mode=None)
        return v


def values(rng: np.random.Generator, shape: tuple[int, ...], positive: bool) -> object:
    """Written-out data: two decimals, away from zero (relu, abs and sign have kinks there)."""
    lo, hi = (0.3, 2.0) if positive else (-2.0, 2.0)
    arr = np.round(rng.uniform(lo, hi, size=shape), 2)
    arr = np.where(np.abs(arr) < 0.1, 0.35, arr)
    return arr.tolist()


def _norm(w: list[float]) -> np.ndarray:
    a = np.array(w, dtype=float)
    return a / a.sum()


def _type(v: Var) -> str:
    if not v.tensor:
        return v.dtype
    return f"{v.dtype}{list(v.shape) if v.shape is not None else '[?]'}"


def broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy/torch broadcasting of two shapes, or None."""
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b), strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def numel(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape)) if shape else 1


# Populated by tests.fuzz.kinds: kind -> draw function, and the weights that make everyday code commonest.
DRAW: dict[str, Callable[[Generator], None]] = {}
KIND_WEIGHTS: dict[str, float] = {}


def kind(name: str, weight: float) -> Callable:
    """Register a statement kind's draw function with its weight."""
    def register(fn: Callable[[Generator], None]) -> Callable[[Generator], None]:
        DRAW[name] = fn
        KIND_WEIGHTS[name] = weight
        return fn
    return register


from tests.fuzz import autograd_kinds as _autograd_kinds  # noqa: E402,F401  (registers the statement kinds)
from tests.fuzz import kinds as _kinds  # noqa: E402,F401
from tests.fuzz import layer_kinds as _layer_kinds  # noqa: E402,F401
