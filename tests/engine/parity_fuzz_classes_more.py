"""Classes of fuzz seeds 64014 and 730200 to 740900 (tests/fuzz/FINDINGS.md), one program each, run on engine
and torch by test_fuzz_classes_more_parity.py. The comments name what differed.

Each is `fn(t, p)` (see parity.py).
"""
from __future__ import annotations

from tests.engine.parity import registry

PROGRAMS, program = registry()


@program("autograd.backward of a non-tensor output: _make_grads' AssertionError")
def _backward_none(t, p):
    # the engine raised TypeError "element 0 of tensors must be a tensor or a GradientEdge" (the C++ engine's
    # check, which torch's Python _make_grads never lets a non-tensor reach)
    x = p.leaf("x", [1.0, 2.0])
    cases = {
        "(None, None)": lambda: t.autograd.backward((None, None)),
        "(None,)": lambda: t.autograd.backward((None,)),
        "None": lambda: t.autograd.backward(None),
        "[x * 2, None]": lambda: t.autograd.backward([x * 2, None]),
        "(None, x * 2)": lambda: t.autograd.backward((None, x * 2)),
        "(0.5, x.sum())": lambda: t.autograd.backward((0.5, x.sum())),
        "grad (None, None)": lambda: t.autograd.grad((None, None), [x]),
        "grad with grad_outputs": lambda: t.autograd.grad((None,), [x], grad_outputs=(t.ones(2),)),
    }
    for tag, case in cases.items():
        p.run(tag, case)
        p.counter(tag)


def _scale_mul(t):
    """The fuzzer's two-output Function (tests/fuzz/program.py's HELPERS), made for the module `t` under test."""
    from tests.fuzz.program import HELPERS

    scope = {"t": t}
    exec(HELPERS["ScaleMul"], scope)
    return scope["ScaleMul"]


@program("norm's grad keeps self's layout: a custom Function's create_graph backward through a batch_first LSTM")
def _norm_layout_through_lstm(t, p):
    # fuzz seed 64014199266: the grad of norm() was laid out C-contiguous on the engine (torch's formula writes
    # self / norm in place, keeping the layout of self, here a batch_first LSTM's transposed output), so the
    # Function's grad for its Linear input viewed where torch clones (CloneBackward0, UnsafeViewBackward0): the
    # engine took one seq_nr fewer
    scale_mul = _scale_mul(t)
    v1 = p.const([[[1.0, 2.0, -3.0], [4.0, -5.0, -6.0]], [[7.0, -8.0, -9.0], [10.0, 11.0, 12.0]],
                  [[13.0, 14.0, 15.0], [16.0, -17.0, -18.0]]])
    lstm = t.nn.LSTM(3, 2, batch_first=True, dtype=t.float64)
    lstm.load_state_dict({
        "weight_ih_l0": p.const([[-1.64, 1.28, 0.72], [0.48, -1.78, 1.15], [1.61, -1.56, -1.78], [-0.39, 0.43, -0.34],
                                 [-1.78, -1.9, -0.43], [0.13, -0.29, 0.15], [0.4, 0.35, 1.43], [1.16, -1.91, -1.88]]),
        "weight_hh_l0": p.const([[-1.07, 0.38], [-1.22, -0.75], [0.11, 0.88], [0.35, 1.74], [-1.33, -1.85],
                                 [1.8, -0.74], [-0.16, -1.45], [-1.34, -1.14]]),
        "bias_ih_l0": p.const([-1.34, 0.18, 0.65, -1.23, -1.56, 1.64, 0.35, 0.37]),
        "bias_hh_l0": p.const([1.68, 1.81, 0.54, 1.26, -0.48, -0.71, 0.59, 0.56])})
    lin = t.nn.Linear(3, 2, dtype=t.float64)
    lin.load_state_dict({"weight": p.const([[-0.45, -1.52, 1.61], [0.35, -1.18, 1.46]]),
                         "bias": p.const([0.95, 0.21])})
    v3 = lstm(v1)[0]
    v5 = lin(v1)
    v6, v7 = scale_mul.apply(v3, v5, -1.5, True)
    v8 = v6.norm()
    p.watch(v8, hooks="new", tag="graph")
    p.run("backward", lambda: v8.backward(create_graph=True))
    p.counter("backward")
    params = (*lstm.parameters(), *lin.parameters())
    p.value("grads", tuple(q.grad for q in params))
    p.watch(*(q.grad for q in params), hooks="new", tag="grads' graph")
    for ord_ in (2, 3, 1.5, 0.5, 1):
        x = v3.detach().requires_grad_()
        g, = t.autograd.grad(x.norm(ord_) * 1, x, create_graph=True)
        p.value(f"norm({ord_}) grad", (g, g.stride()))
        p.counter(f"norm({ord_})")


@program("advanced indexing of an expanded or permuted tensor: torch's result layout, and Linear's fold")
def _index_layout(t, p):
    # the engine kept numpy's layout for `x[idx]` of an expanded 4-d tensor (strides (36, 4, 1, 12)); torch's index
    # kernel writes it C-contiguous there, so F.linear folds it (ViewBackward0, AddmmBackward0) where the engine
    # took the matmul path (AddBackward0)
    w = p.leaf("w", [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    b = p.leaf("b", [0.1, 0.2])
    base = p.leaf("base", [[1.0, 2.0, 3.0]])
    y = t.nn.functional.linear(base.expand(2, 3, 4, 3)[t.tensor([0, 1])], w, b)
    p.watch(y)
    p.value("y", (y, y.stride()))
    p.run("backward", lambda: y.sum().backward())
    p.value("grads", (w.grad, b.grad, base.grad))
    i2, i22 = t.tensor([0, 1]), t.tensor([[0, 1], [1, 0]])
    sources = {
        "contiguous": lambda: t.arange(24.).reshape(2, 3, 4),
        "transposed": lambda: t.arange(24.).reshape(2, 3, 4).transpose(0, 2),
        "permuted": lambda: t.arange(24.).reshape(2, 3, 4).permute(1, 2, 0),
        "expanded last": lambda: t.arange(4.).reshape(1, 1, 4).expand(2, 3, 4),
        "expanded middle": lambda: t.arange(3.).reshape(1, 3, 1).expand(2, 3, 4),
        "expanded, transposed": lambda: t.arange(6.).reshape(2, 1, 3).expand(2, 4, 3).transpose(0, 2),
        "sliced": lambda: t.arange(48.).reshape(2, 3, 8)[:, :, ::2],
    }
    keys = {"[i]": (i2,), "[:, i]": (slice(None), i2), "[..., i]": (Ellipsis, i2), "[i, i]": (i2, i2),
            "[i, :, i]": (i2, slice(None), i2), "[mask]": (t.tensor([True, False]),),
            "[:, 2-d mask]": (slice(None), t.tensor([[True, False, True, False]] * 3)),
            "[2-d i]": (i22,), "[:, 2-d i.t()]": (slice(None), i22.t()),
            "[i.t(), :, 2-d i]": (i22.t(), slice(None), i22),
            "[column i, :, i]": (i2.reshape(2, 1), slice(None), i2)}
    for sname, make in sources.items():
        for kname, key in keys.items():
            p.run(f"{sname}{kname}", lambda make=make, key=key: _layout(make()[key]))


def _layout(r):
    return tuple(r.shape), r.stride()


@program("maximum's grad keeps where's layout: a leaf's grad through a transposed view is stolen, version 0")
def _maximum_grad_layout(t, p):
    # fuzz seed 730202192993: the engine's maximum formula laid its grad out C-contiguous (an out-of-place
    # masked_fill) where torch's masked_fill_ keeps where's layout; through a transpose the leaf's grad then came
    # non-contiguous, and AccumulateGrad copied it (version 1) where torch's stole it (version 0). v6's grad, the
    # sum of that permuted grad to (3, 1, 1), has torch's contiguous strides at its size-1 dims: (1, 1, 1)
    for order in ("v6, v5", "v5, v6"):
        v1 = p.leaf(f"v1 {order}", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        v5 = t.unsqueeze(v1.div(p.const([[1.0], [2.0]])).transpose(1, 0), 1)
        v6 = p.leaf(f"v6 {order}", [[[1.0]], [[2.0]], [[3.0]]])
        out = v6.maximum(v5) if order == "v6, v5" else t.maximum(v5, v6)
        v5.register_hook(lambda g: p.value("v5 grad layout", (g.stride(), g._version)))
        p.watch(out)
        p.run("backward", lambda out=out: out.sum().backward())
        p.made("grads", v1.grad, v6.grad)
        p.value("strides", (v1.grad.stride(), v6.grad.stride()))  # v6's: a sum's strides at size-1 dims


@program("advanced indexing's bounds error numbers the index tensors, not the dims they index")
def _index_bounds_dim(t, p):
    # fuzz seed 730402194242: `x[:, t.tensor([2, 3])]` on a (2, 3, 4) x: torch "... for dimension 0 with size 3"
    # (the kernel's index number), the engine named dimension 1
    x = p.leaf("x", [[[float(i + 4 * j + 12 * k) for i in range(4)] for j in range(3)] for k in range(2)])
    cases = {
        "[:, i]": lambda: x[:, t.tensor([2, 3])],
        "[i, i]": lambda: x[t.tensor([0]), t.tensor([5])],
        "[:, :, i]": lambda: x[:, :, t.tensor([7])],
        "[i, :, i]": lambda: x[t.tensor([0]), :, t.tensor([7])],
        "[..., i]": lambda: x[..., t.tensor([9])],
        "[:, 2-d i]": lambda: x[:, t.tensor([[1, 3], [0, 0]])],
        "set [:, i]": lambda: x.detach().clone().__setitem__((slice(None), t.tensor([3])), 1.0),
        "set [i, :, i]": lambda: x.detach().clone().__setitem__((t.tensor([0]), slice(None), t.tensor([7])), 1.0),
    }
    for tag, case in cases.items():
        p.run(tag, case)
        p.counter(tag)


@program("a write through a mask or index into a ZeroTensor grad is refused, whatever the mask selects")
def _zerotensor_setitem(t, p):
    # fuzz seed 730402192751: sgn's grad is a ZeroTensor; `g[g > 0.5] = 2.0` selects nothing, and torch still
    # refuses it ("ZeroTensors are immutable"), where the engine wrote nothing and bumped the version
    v1 = p.leaf("v1", [[1.0, -2.0], [-3.0, 4.0], [5.0, 6.0]])
    writes = {
        "mask selecting nothing": lambda g: g.__setitem__(g > 0.5, 2.0),
        "mask selecting all": lambda g: g.__setitem__(g < 0.5, 2.0),
        "index": lambda g: g.__setitem__(t.tensor([0]), 1.0),
        "mask of the wrong shape": lambda g: g.__setitem__(t.tensor([True, False]), 1.0),
    }
    for tag, write in writes.items():
        g, = t.autograd.grad(v1.sgn().sum(), [v1])
        p.run(tag, lambda g=g, write=write: write(g))
        p.made(tag, g)


@program("InputBuffer sums in place into a grad that is dense in a permuted order: its layout kept, version 1")
def _permuted_grad_summed_in_place(t, p):
    # fuzz seed 730500: `v1.select(1, 1).mul(v1)` then a transpose; mul's grad for v1, laid out (4, 1, 2) as the
    # transposed grad, reaches v1's buffer first and select's grad is added to it in place (torch's
    # can_accumulate_inplace asks for non-overlapping and dense, in any dim order). The engine asked for C or F
    # order, summed out of place into a C-ordered grad (4, 2, 1), version 0
    # With mul's grad held by a hook the sum is out of place, laid out as TensorIterator lays out `old + new`:
    # as the first operand, the grad in the buffer (numpy's sum of mixed layouts is C-ordered)
    values = [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]
    held: list = []
    for dims in ((1, 2), (0, 1), (0, 2)):
        for how in ("backward", "autograd.grad", "held, autograd.grad"):
            v1 = p.leaf(f"v1 {dims} {how}", values)
            product = v1.select(1, 1).mul(v1)
            if how.startswith("held"):
                product.grad_fn.register_hook(lambda gi, go: held.append(gi[1]))
            out = product.transpose(*dims)
            if how == "backward":
                out.backward(t.ones(out.shape))
                g = v1.grad  # AccumulateGrad copies a grad against v1's layout: copy_ makes version 1 too
            else:
                g, = t.autograd.grad(out, [v1], t.ones(out.shape))
            p.made(f"{dims} {how}", g)
            p.value(f"{dims} {how} layout", (g.stride(), g._version))


@program("layer_norm's double backward hands on views its composite wrote in place: their versions and layouts")
def _layer_norm_double_backward_views(t, p):
    # fuzz seed 730302200055: torch's layer_norm_double_backward builds gI with div_ and add_s, then reshape_as:
    # a view, version 3, whose base holds the memory, so v1's InputBuffer summed the other path's grad out of
    # place (version 0, stolen); the engine's fresh gI was summed into (version 1)
    v1 = p.leaf("v1", [[1.0, 2.0, -3.0], [4.0, 5.0, -6.0]])
    m2 = t.nn.LayerNorm(3, dtype=t.float64)
    m2.load_state_dict({"weight": p.const([-1.94, 1.16, 0.11]), "bias": p.const([1.5, 0.36, 0.79])})
    v5, = t.autograd.grad(m2(v1).pow(2).sum(), [v1], create_graph=True)
    v5.var().backward()
    p.made("two paths into v1", v1.grad, m2.weight.grad, m2.bias.grad)
    scale = p.const([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]])
    for shape in ((2, 3), (1, 2, 3), (3, 2)):
        x = p.leaf(f"x {shape}", [[1.0, 2.0, -3.0], [4.0, 5.0, -6.0]])
        w, b = p.leaf(f"w {shape}", [-1.94, 1.16, 0.11]), p.leaf(f"b {shape}", [1.5, 0.36, 0.79])
        xs = x.t().reshape(2, 3) if shape == (3, 2) else x.reshape(shape)  # (3, 2): not a view of x
        out = t.nn.functional.layer_norm(xs, (3,), w, b)
        gx, gw, gb = t.autograd.grad((out.pow(2) * scale.reshape(xs.shape)).sum(), [x, w, b], create_graph=True)
        for k, which in enumerate(((gx,), (gw,), (gb,), (gx, gw), (gx, gw, gb), (gw, gb))):
            node = next(gr.grad_fn for gr in (gw, gb) if gr.grad_fn.name() == "NativeLayerNormBackwardBackward0")
            handle = node.register_hook(lambda gi, go, tag=f"{shape} {k}": p.value(tag, tuple(
                None if g is None else (g._version, g.stride(), g.is_contiguous()) for g in gi)))
            p.run(f"{shape} {k}", lambda which=which: sum((g * g).sum() for g in which).backward(retain_graph=True))
            handle.remove()
            p.made(f"{shape} {k} grads", x.grad, w.grad, b.grad)
            x.grad = w.grad = b.grad = None
    y = p.leaf("y", [[1.0, 2.0, -3.0], [4.0, 5.0, -6.0]])
    gy, = t.autograd.grad(t.nn.functional.layer_norm(y, (3,)).pow(3).sum(), [y], create_graph=True)
    gy.sum().backward()
    p.made("gI alone reaches the leaf: stolen with its version", y.grad)


@program("relu_ and leaky_relu_ on a view save the view: a later write to its base fails the backward")
def _inplace_relu_on_view_saved(t, p):
    # fuzz seed 740102224388: `v2.view(2, 2).relu_()`, then `v2.div_(1.0)`: torch's ReluBackward0 saved the view
    # (is_inplace_on_view) at version 1 and refuses it at 2 ("output 0 of Relu"); the engine saved a copy
    for op in ("relu_", "leaky_relu_"):
        for later in ("div_ of the base", "mul_ of the view", "nothing"):
            v1 = p.leaf(f"v1 {op} {later}", [-1.0, -2.0, 3.0, -4.0])
            v2 = v1 ** 3
            v3 = v2.view(2, 2)
            if op == "relu_":
                v3.relu_()
            else:
                t.nn.functional.leaky_relu_(v3, 0.1)
            p.made(f"{op} {later}", v3, v2)
            if later == "div_ of the base":
                v2.div_(p.const(1.0))
            elif later == "mul_ of the view":
                v3.mul_(2.0)
            p.run(f"{op} {later} backward", lambda v3=v3: v3.mean().backward())
            p.made(f"{op} {later} grad", v1.grad)
    # fuzz seed 740402225065: the error names the view's grad_fn when it was saved while that node lives ("output
    # 0 of AsStrided"), else the saving node ("of Relu", as above); the engine named Relu always
    for how in ("backward((s, s), retain_graph=True)", "s.backward()"):
        v1 = p.const([[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]] * 2)
        v2 = p.leaf(f"v2 {how}", [[[1.0, -2.0], [3.0, -4.0], [5.0, 6.0], [7.0, -8.0]]] * 2)
        v4 = (v1 @ v2).permute((1, 0, 2))
        t.relu_(v4)
        v4 *= 2
        s = v4.sum()
        p.run(f"relu_, then *= 2 of the view, {how}",
              lambda s=s, how=how: t.autograd.backward((s, s), retain_graph=True)
              if how.startswith("backward") else s.backward())


@program("F.relu and F.leaky_relu with inplace=True name the in-place aten op in the parser's error")
def _inplace_functional_none(t, p):
    # fuzz seed 740302228895: `F.leaky_relu(None, 0.1, inplace=True)`: torch calls torch._C._nn.leaky_relu_, whose
    # parser says "leaky_relu_(): argument 'input' ..."; the engine named leaky_relu
    F = t.nn.functional
    cases = {"leaky_relu inplace": lambda: F.leaky_relu(None, 0.1, inplace=True),
             "leaky_relu inplace by keyword": lambda: F.leaky_relu(None, inplace=True),
             "leaky_relu": lambda: F.leaky_relu(None, 0.1), "relu inplace": lambda: F.relu(None, inplace=True),
             "relu inplace positional": lambda: F.relu(None, True), "relu": lambda: F.relu(None)}
    for tag, case in cases.items():
        p.run(tag, case)


@program("Dropout1d/2d/3d of None: torch's Python checks p, then calls input.dim()")
def _channel_dropout_none(t, p):
    # fuzz seed 740602224164: `nn.Dropout2d(0.0)(None)`: torch raised AttributeError ('NoneType' object has no
    # attribute 'dim'), the engine the parser's TypeError; an out-of-range p raises its ValueError first
    F = t.nn.functional
    cases = {"Dropout2d(0.0)": lambda: t.nn.Dropout2d(0.0)(None), "Dropout1d()": lambda: t.nn.Dropout1d()(None),
             "Dropout3d(1.0)": lambda: t.nn.Dropout3d(1.0)(None),
             "dropout1d p=0.2": lambda: F.dropout1d(None, p=0.2),
             "dropout2d(None, 2.0)": lambda: F.dropout2d(None, 2.0),
             "dropout3d p=-1": lambda: F.dropout3d(None, p=-1.0),
             "dropout2d eval": lambda: F.dropout2d(None, 0.5, False), "dropout(None)": lambda: F.dropout(None)}
    for tag, case in cases.items():
        p.run(tag, case)
        p.counter(tag)


@program("a number ** a tensor is contiguous whatever the exponent's layout (pow.Scalar's output)")
def _pow_scalar_base_layout(t, p):
    # fuzz seeds 740602225133 and 740602230214: `2 ** v` of a GRU's batch_first output (or of a permuted tensor)
    # kept the exponent's strides on the engine; torch's is contiguous, so the matmul that follows folds without
    # a copy (one seq_nr fewer), and nn.Linear on a slice of it is matmul + add, not addmm + view
    v1 = p.leaf("v1", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    v2 = v1.permute(1, 0)
    for tag, base in (("2 **", 2), ("1.5 **", 1.5), ("1 **", 1)):
        v3 = base ** v2
        p.made(tag, v3)
        p.value(f"{tag} strides", (v3.stride(), v3.is_contiguous()))
    v3 = t.pow(1.5, v2)
    p.value("pow(1.5, v2) strides", v3.stride())
    v4 = v3[None, 1:, 1:]
    m5 = t.nn.Linear(1, 1, dtype=t.float64)
    m5.load_state_dict({"weight": p.const([[-0.93]]), "bias": p.const([-0.57])})
    v6 = m5(v4)
    p.made("Linear", v6)
    p.watch(v6, tag="Linear graph")
    v7 = p.leaf("v7", [[[1.0, 2.0, 3.0, 4.0]] * 3] * 2).permute(1, 0, 2)
    v8 = 2 ** v7
    p.made("2 ** 3-d", v8)
    v9 = v8 @ p.leaf("v9", [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    p.made("matmul", v9)
    p.watch(v9, tag="matmul graph")
    v10 = t.pow(p.const(2.0), v2)  # a 0-dim tensor base: pow.Tensor_Tensor, laid out as the exponent
    p.value("pow(tensor(2.), v2) strides", v10.stride())


@program("an in-place op refused on a stale expanded view: its AsStridedBackward0 comes after the op's node")
def _inplace_refused_stale_view(t, p):
    # fuzz seed 740602229157: `v5 = v4.expand(2)`, `v4 /= v3`, then `v5 *= v6`, which the kernel refuses (internal
    # overlap): torch made MulBackward0, then collected its edges, regenerating v5's grad_fn (one seq_nr later);
    # the engine regenerated it first, so v5's AsStridedBackward0 had one seq_nr less
    ops = {"*= tensor": lambda v, w: v.mul_(p.const(1.0)), "*= leaf": lambda v, w: v.mul_(w),
           "/= leaf": lambda v, w: v.div_(w), "+= 2": lambda v, w: v.add_(2.0), "-= leaf": lambda v, w: v.sub_(w),
           "clamp_": lambda v, w: v.clamp_(-1.0, 1.0), "clamp_ tensor": lambda v, w: v.clamp_(min=w),
           "*= tensor, fresh view": None}
    for tag, op in ops.items():
        v1 = p.leaf(f"v1 {tag}", [1.0, 2.0, 3.0])
        v2 = p.leaf(f"v2 {tag}", [1.0, 2.0, 3.0])
        w = p.leaf(f"w {tag}", 2.0)
        v3 = v2.dot(v1)
        v4 = v3.sin()
        v5 = v4.expand(2)
        if op is None:
            p.run(tag, lambda v5=v5: v5.mul_(p.const(1.0)))
        else:
            v4 /= v3
            p.run(tag, lambda v5=v5, w=w, op=op: op(v5, w))
        p.made(tag, v5, v4)
        p.counter(tag)
        p.watch(v5, tag=f"{tag} graph")
        p.run(f"{tag} backward", lambda v5=v5: v5.backward(t.ones_like(v5)))
        p.value(f"{tag} grads", (v1.grad, v2.grad, w.grad))


@program("cross_entropy with a target of the input's shape wants class probabilities: a floating target")
def _cross_entropy_target_shape(t, p):
    # fuzz seed 740702223445: `CrossEntropyLoss()(v3, t.tensor([0, 0, 0]))` with v3 of shape (3,): torch's
    # cross_entropy_loss reads equal shapes as class probabilities and refuses a Long target; the engine took the
    # class-index path and raised numpy's IndexError
    F = t.nn.functional
    v1 = p.leaf("v1", [-1.0, -2.0, 3.0])
    cases = {"(3,), Long (3,)": lambda: t.nn.CrossEntropyLoss()(t.t(v1[:]), t.tensor([0, 0, 0])),
             "0-dim, Long 0-dim": lambda: F.cross_entropy(v1[0], t.tensor(0)),
             "(2, 3), Bool (2, 3)": lambda: F.cross_entropy(v1.expand(2, 3), t.zeros(2, 3, dtype=t.bool)),
             "label_smoothing=2.0": lambda: F.cross_entropy(v1, t.tensor([0, 1, 2]), label_smoothing=2.0),
             "ignore_index, Int": lambda: F.cross_entropy(v1.expand(2, 3), t.zeros(2, 3, dtype=t.int32),
                                                          ignore_index=1),
             "(2, 3), Long (2,)": lambda: F.cross_entropy(v1.expand(2, 3), t.tensor([0, 2]))}
    for tag, case in cases.items():
        p.made(tag, p.run(tag, case))
        p.counter(tag)


@program("smooth_l1/huber double backward under mean: the formula's `grad_input /= numel` counts; |d| == delta is 0")
def _loss_double_backward_mean_version(t, p):
    # fuzz seed 740902227971: `autograd.grad((v1.grad ** 2).mean(), [v1])` after `huber_loss(v1, v1)`'s create_graph
    # backward had _version 3 on the engine, 4 on torch: huber_loss_double_backward and
    # smooth_l1_loss_double_backward divide by the numel in place under mean reduction (not for smooth_l1's
    # beta=0, which returns zeros first), as mse_loss's does. Their mask is d < delta, strict for huber too
    F = t.nn.functional
    losses = {"huber": lambda x, y, **kw: F.huber_loss(x, y, **kw),
              "huber delta 2": lambda x, y, **kw: F.huber_loss(x, y, delta=2.0, **kw),
              "smooth_l1": lambda x, y, **kw: F.smooth_l1_loss(x, y, **kw),
              "smooth_l1 beta 0": lambda x, y, **kw: F.smooth_l1_loss(x, y, beta=0.0, **kw),
              "mse": lambda x, y, **kw: F.mse_loss(x, y, **kw)}
    for name, loss in losses.items():
        for reduction in ("mean", "sum", "none"):
            for needs in ("same", "input", "target", "both"):
                tag = f"{name} {reduction} {needs}"
                a = p.leaf(f"a {tag}", [[[1.0, 2.0, -3.0]], [[-4.0, 5.0, -6.0]]])
                b = p.leaf(f"b {tag}", [[[1.5, 1.0, -3.0]], [[-4.2, 9.0, -8.0]]])
                x, y = {"same": (a, a), "input": (a, b.detach()), "target": (a.detach(), b), "both": (a, b)}[needs]
                wrt = [v for v in (a, b) if v is x or v is y]
                v2 = loss(x, y, reduction=reduction)
                gs = t.autograd.grad(v2, wrt, grad_outputs=t.ones_like(v2), create_graph=True)
                p.made(f"{tag} grads", *gs)
                v4 = sum(((g ** 2).mean() for g in gs), start=p.const(0.0))
                p.made(f"{tag} second", *t.autograd.grad(v4, wrt))
