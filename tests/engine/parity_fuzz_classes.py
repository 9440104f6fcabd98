"""Classes of divergence the differential fuzzer found (tests/fuzz/FINDINGS.md): one program each with the
minimal repro, run on engine and torch by test_fuzz_classes_parity.py.

Each is `fn(t, p)` (see parity.py). The comments name what differs when the class comes back.
"""
from __future__ import annotations

import math
import warnings

from tests.engine.parity import registry

PROGRAMS, program = registry()


def _made(p, tag: str, *tensors) -> None:
    p.made(tag, *tensors)


@program("a grad AccumulateGrad cannot adopt is copied by copy_: version 1")
def _grad_copy_version(t, p):
    for tag, f in (("sum", lambda x: x.sum()), ("sum of sum(0)", lambda x: x.sum(0, keepdim=True).sum()),
                   ("mul", lambda x: (x * 2).sum()), ("mean", lambda x: x.mean()), ("view", lambda x: x.view(2, 2).sum())):
        x = p.leaf("x " + tag, [1.0, -2.0, 3.0, 4.0])
        y = f(x)
        p.watch(y)  # Node pre-hooks on every node: the grads are moved out of the buffer first, as in torch
        y.backward()
        _made(p, tag, x.grad)


@program("x.data has its own version counter; detach() and .data of an inference tensor")
def _data_version(t, p):
    x = p.leaf("x", [1.0, 2.0, -3.0])
    d = x.data
    d *= 2
    _made(p, "after d *= 2", x, d)
    y = p.const([[1.0, 2.0], [3.0, 4.0]]).t().tanh()
    y.mul_(1)
    _made(p, ".data of a view of F-ordered memory", y.unsqueeze(0).data)
    with t.inference_mode():
        v = x * 2
    a, b = v.data, v.detach()
    p.value("inference", (a.is_inference(), b.is_inference(), a._version, b._version))
    p.run("write .data outside inference_mode", lambda: a.add_(1))
    p.value("shared memory", (v,))


@program("grads written in place by torch's formulas count their writes")
def _formula_versions(t, p):
    x = p.leaf("x", [[1.0, 2.0, 3.0], [-4.0, 5.0, 6.0]])
    c = p.const([[0.5, 2.0, -1.0], [1.0, 0.0, 2.0]])
    F = t.nn.functional
    cases = {"max(dim)": lambda: x.max(dim=1)[0], "max()": lambda: x.max(), "gather": lambda: x.gather(1, t.tensor([[0], [1]])),
             "index": lambda: x[[0, 1], [1, 2]], "mask": lambda: x[x > 2], "index_select": lambda: x.index_select(1, t.tensor([2, 2])),
             "maximum": lambda: x.maximum(c), "bce": lambda: F.binary_cross_entropy_with_logits(x, c.sigmoid()),
             "bce weight": lambda: F.binary_cross_entropy_with_logits(x, c.sigmoid(), weight=c[0].abs()),
             "bce pos_weight sum": lambda: F.binary_cross_entropy_with_logits(x, c.sigmoid(), pos_weight=c[0].abs(),
                                                                               reduction="sum")}
    for tag, f in cases.items():
        y = f()
        g, = t.autograd.grad(y.sum() if y.dim() else y, [x])
        _made(p, tag, g)
    v = p.leaf("v", 1.0)
    s = v + v  # one grad tensor for both edges: summed out of place, then adopted
    s.backward()
    _made(p, "x + x", v.grad)


@program("sign's grad is plain zeros, sgn's a ZeroTensor AccumulateGrad adopts")
def _sign_zeros(t, p):
    a = p.leaf("a", [0.5, -1.0, 0.0, float("nan")])
    p.value("nan", (a.sign(), a.sgn()))
    a.sign().sum().backward()
    p.value("sign", (a.grad._is_zerotensor(), a.grad))
    b = p.leaf("b", [0.5, -1.0, 2.0])
    b.sgn().pow(2).sum().backward()
    p.value("sgn", (b.grad._is_zerotensor(),))
    p.run("second backward into the ZeroTensor", lambda: b.sgn().sum().backward())
    n = p.leaf("n", [float("nan"), 1.0])
    n.abs().sum().backward()
    p.value("abs at nan", (n.grad,))


@program("a node that saved nothing backs up twice; saved inputs named as they are now")
def _saved_classes(t, p):
    m = p.const([[1.0, 2.0], [3.0, 4.0]])
    b = p.leaf("b", [1.0, 2.0])
    z = t.nn.functional.linear(m, m, b).sum()
    z.backward()
    p.run("second backward", lambda: z.backward())
    p.value("b.grad", (b.grad,))
    w = p.const([[-1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    v = p.leaf("v", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    y = t.matmul(w, v).sum()
    w.sub_(p.leaf("s", 1.0) * 2)  # the constant gets history: the error names Sub
    p.run("backward", lambda: y.backward())
    x = p.leaf("x", [[1.0, -2.0, -3.0], [-4.0, 5.0, 6.0]])
    h = x * 2
    loss = t.nn.functional.mse_loss(h, h)
    h.detach_()
    p.run("detached saved", lambda: loss.backward())
    e = p.leaf("e", 1.0)
    th = e.tanh()
    g, = t.autograd.grad(th, [e], create_graph=True)
    th += -0.25  # the double-backward node saved the unpacked output, whose grad_fn stays TanhBackward0
    p.run("double backward", lambda: g.backward())


@program("a custom Function's inputs are unpacked before its node takes a seq_nr")
def _function_order(t, p):
    class Twice(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    a = p.leaf("a", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = a * 1
    v = b.t()
    with t.no_grad():
        b.mul_(2)
    y = Twice.apply(v)
    p.watch(y)
    _made(p, "y", y, v)


@program("stale views: regeneration after the node, as torch orders it")
def _stale_view_order(t, p):
    v1 = p.leaf("v1", [[1.0], [2.0]])
    v2, v3 = v1[:], v1.squeeze()
    v4 = t.exp(v3)
    with t.no_grad():
        v2.mul_(1)
    v4.mul_(v3)  # MulBackward0, then v3's AsStridedBackward0, then the clone of self
    p.watch(v4)
    _made(p, "end", v1, v2, v3, v4)
    w1 = p.leaf("w1", [[1.0, -2.0, 3.0], [-4.0, 5.0, 6.0]])
    w2 = w1.transpose(1, 0)
    loss = (w1 ** 2).mean()
    with t.no_grad():
        w1.mul_(2)
    p.run("setitem on a stale view of a leaf", lambda: w2.__setitem__(0, loss))
    _made(p, "after", w2)


@program("reading .grad of a stale view does not regenerate its grad_fn (no seq_nr)")
def _stale_view_grad_read(t, p):
    for retain in (False, True):
        x = p.leaf(f"x retain={retain}", [-1.0, -2.0, 3.0])
        v = x.expand(2, 3)
        if retain:
            v.retain_grad()
        with t.no_grad():
            x.mul_(2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p.value("grad", v.grad)  # seq_nr 1 if the leaf test regenerates the view
        y = x * 2
        _made(p, "after", y, v)


@program("mse_loss's double backward: grad_output's grad is one MseLossBackwardBackward0, summed last")
def _mse_double_backward(t, p):
    for reduction in ("mean", "sum", "none"):
        x = p.leaf("x " + reduction, [1.0, 2.0, -3.0, 4.0])
        y = p.leaf("y " + reduction, [0.5, 2.5, -1.0, 3.0])
        go = p.leaf("go " + reduction, [1.0, 2.0, 3.0, 4.0] if reduction == "none" else 3.0)
        gx, = t.autograd.grad(t.nn.functional.mse_loss(x, y, reduction=reduction), [x], go, create_graph=True)
        grads = t.autograd.grad(gx.sum(), [go, x, y], create_graph=True)  # before: SubBackward0 and 2 more nodes
        for g in grads:
            p.watch(g)
        _made(p, "grads " + reduction, *grads)


@program("optimizers with a parameter listed twice: SGD's momentum buffers read before the loop")
def _duplicate_params(t, p):
    for tag, make in (("SGD momentum", lambda ps: t.optim.SGD(ps, lr=0.1, momentum=0.9)),
                      ("SGD nesterov", lambda ps: t.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)),
                      ("Adam", lambda ps: t.optim.Adam(ps, lr=0.1)), ("RMSprop", lambda ps: t.optim.RMSprop(ps, lr=0.1))):
        x = p.leaf("x " + tag, [1.0, 2.0, 3.0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns of the duplicate
            opt = make([x, x.double()])  # double() of a float64 tensor is the tensor itself
        for step in range(3):
            opt.zero_grad()
            (x * x).sum().backward()
            opt.step()
            p.value(f"{tag} step {step}", x)


@program("CopySlices of an expanded view: its backward's copy into the grad's slice overlaps itself")
def _copy_slices_expanded(t, p):
    cases = {"zero_": lambda v: v.zero_(), "fill_": lambda v: v.fill_(2.0),
             "masked_fill_": lambda v: v.masked_fill_(v > 1, 0.0),
             "index_put_": lambda v: v.index_put_((t.tensor([0]),), t.tensor(2.0, dtype=t.float64))}
    for tag, write in cases.items():
        x = p.leaf("x " + tag, [1.0, 2.0])
        s = x.std(dim=-1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch deprecates writing expanded tensors
            write(s.expand(2))
        p.run(tag + " backward", s.backward)  # the engine raised the saved-version error of StdBackward0 instead


@program("the saved-version error names a saved input as output 0 of its grad_fn now, a saved output by its number")
def _saved_output_numbers(t, p):
    class Two(t.autograd.Function):
        @staticmethod
        def forward(ctx, x, save):
            a, b = x * 2, x * 3
            if save:
                ctx.save_for_backward(b)  # a saved output: output 1 of Two
            return a, b

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * (ctx.saved_tensors[0] if ctx.saved_tensors else 3), None

    writes = {"mask": lambda b: b.__setitem__(b > 0.5, 2.0), "view": lambda b: b.view(-1).mul_(2),
              "direct": lambda b: b.mul_(2), "no_grad": lambda b: _under_no_grad(t, lambda: b.mul_(2))}
    for shape in ((), (1,)):
        for tag, write in writes.items():
            for save in (False, True):
                x = p.leaf(f"x {shape} {tag} {save}", 1.0 if shape == () else [1.0])
                a, b = Two.apply(x, save)
                y = b.pow(2)  # saves b as an input: not "output 1 of Two"
                write(b)
                p.run(f"{shape} {tag} save={save}", lambda y=y, a=a: (y + a).sum().backward())


def _under_no_grad(t, fn):
    with t.no_grad():
        fn()


@program("stale views regenerate in input order when tensors are saved early (after inference_mode was used)")
def _stale_views_saved_early(t, p):
    with t.inference_mode():  # switches the engine to saving at the node's creation for the rest of the process
        pass
    x = p.leaf("x", [1.0, 2.0, 3.0])
    s = x.sum()
    a = t.unsqueeze(s, -1)
    b = t.unsqueeze(a, 0)
    s *= 1
    y = a.mul(b)  # MulBackward0, then a's AsStridedBackward0, then b's: b's came first
    p.watch(y)
    _made(p, "y", y, a, b)


@program("a node that saved its own output is freed once the output is detach_()ed: an unreachable leaf gets Identity")
def _saved_output_freed(t, p):
    class Exp(t.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x.exp()
            ctx.save_for_backward(out)
            return out

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]

    for tag, f in (("exp", lambda v: (v * 2).exp()), ("custom Function", lambda v: Exp.apply(v * 2))):
        x = p.leaf("x " + tag, [1.0, 2.0])
        w = p.leaf("w " + tag, [[1.0], [2.0]])
        y = f(w)
        y.detach_()  # ExpBackward0 and MulBackward0 go, and w's AccumulateGrad with them
        s = x.sum()
        gx, gw = t.autograd.grad(s, [x, w], allow_unused=True)  # w unreachable: an Identity node takes a seq_nr
        _made(p, tag, gx, x.exp())


@program("t[key] = value: the views and the value's view and expand take their seq_nrs before a refusal")
def _setitem_seq_nrs(t, p):
    keys = {"0": lambda: 0, "0,1:": lambda: (0, slice(1, None)), ":": lambda: slice(None), "...": lambda: ...,
            "idx": lambda: t.tensor([0]), "0,idx": lambda: (0, t.tensor([1])), "mask": lambda: t.tensor([True, False]),
            "None": lambda: None, "1:": lambda: slice(1, None), "0-dim mask": lambda: t.tensor(True)}
    values = {"number": lambda: 3.0, "[1]": lambda: p.leaf("v", [1.0]), "[[1]]": lambda: p.leaf("v", [[1.0]]),
              "0-dim": lambda: p.leaf("v", 1.0), "[1] constant": lambda: p.const([1.0]),
              "[3]": lambda: p.leaf("v", [1.0, 2.0, 3.0])}
    targets = {"leaf": lambda w: w, "view of a leaf": lambda w: w[:], "non-leaf": lambda w: w * 1,
               "view of a non-leaf": lambda w: (w * 1)[:], "view, no grad": lambda w: w.detach()[1:]}
    for kn, key in keys.items():
        for vn, value in values.items():
            for tn, target in targets.items():
                w = p.leaf("w", [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
                dst, v, k = target(w), value(), key()
                start = t.autograd._get_sequence_nr()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p.run(f"{kn} = {vn} on {tn}", lambda dst=dst, k=k, v=v: dst.__setitem__(k, v))
                p.value(f"{kn} = {vn} on {tn}: seq_nrs taken", t.autograd._get_sequence_nr() - start)


@program("post-accumulate-grad hooks: a valid result is refused after every hook ran, an invalid one at once")
def _post_acc_hook_results(t, p):
    for tag, result in (("tensor", lambda: t.zeros(3, dtype=t.float64)), ("int", lambda: 5),
                        ("wrong shape", lambda: t.zeros(2, dtype=t.float64))):
        x = p.leaf("x " + tag, [1.0, 2.0, 3.0])
        x.register_post_accumulate_grad_hook(lambda v, tag=tag, result=result: (p.value(tag + " first", v.grad), result())[1])
        y = x.mean()
        x.register_post_accumulate_grad_hook(lambda v, tag=tag: p.value(tag + " second", v.grad))
        p.run(tag + " backward", y.backward)


@program("ZeroTensor grads summed in an input buffer stay a ZeroTensor, so a later grad is not summed into them")
def _zero_tensor_sums(t, p):
    for tag, f in (("sgn, sgn, mul", lambda y: y.sgn() + y.sgn() + y * 3),
                   ("mul, sgn, sgn", lambda y: y * 3 + y.sgn() + y.sgn()),
                   ("sgn - sgn, exp", lambda y: (y.sgn() - y.sgn()) * y.exp())):
        x = p.leaf("x " + tag, [1.0, -2.0, 3.0])
        y = x * 1
        out = f(y).sum()
        g, = t.autograd.grad(out, [y])  # torch's ZeroTensor + ZeroTensor is one: not summed in place (version 0)
        _made(p, tag, g)
        g2, = t.autograd.grad(f(y).sum(), [y], create_graph=True)  # summed by AddBackward0 in grad mode
        _made(p, tag + " create_graph", g2)


@program("a grad AccumulateGrad copies is laid out as the variable, not as the grad (an expanded one)")
def _grad_copy_layout(t, p):
    for tag, make in (("contiguous", lambda: t.arange(24.0, dtype=t.float64).reshape(2, 3, 4)),
                      ("transposed", lambda: t.arange(24.0, dtype=t.float64).reshape(4, 3, 2).transpose(0, 2))):
        for create_graph in (False, True):
            x = make().requires_grad_()
            x.sum(-2).clamp_max(0.4).sum().backward(create_graph=create_graph)  # the grad reaches x expanded
            p.value(f"{tag} create_graph={create_graph}", (tuple(x.grad.stride()), x.grad._version))
            g = x.grad.detach().requires_grad_()
            if tag == "contiguous":  # a contiguous 3-D input: linear folds it with views (ViewBackward0)
                w = p.const([[1.0, 0.5, -1.0, 2.0], [0.5, 0.5, 0.5, 0.5], [1.0, -2.0, 0.0, 1.0]])
                _made(p, f"create_graph={create_graph}: linear on the grad", t.nn.functional.linear(g, w))


@program("cat and stack compute their inputs' grads only when one of them is needed (a no_grad view has no edge)")
def _list_inputs_needed(t, p):
    for op in ("stack", "cat"):
        for case in ("no input needed", "one needed"):
            x = p.leaf(f"x {op} {case}", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
            c = p.leaf(f"c {op} {case}", [[1.0, 2.0, 3.0]])
            with t.no_grad():
                v = x[:1]  # requires grad, no edge
            y = getattr(t, op)([v, v] if case == "no input needed" else [v, c, v], dim=0)
            z = y.pow(2).sum()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                z.backward(create_graph=True)  # the selects or slices took seq_nrs before, needed or not
            _made(p, f"{op}, {case}", y * 1, c.grad)


@program("an op refused by its kernel after its node was made has collected its edges: stale views regenerate")
def _stale_views_before_kernel_errors(t, p):
    cases = {"addmm dtypes": lambda v, b: t.addmm(b, v, p.const([[-1.0, -2.0], [3.0, -4.0]]).float()),
             "mm dtypes": lambda v, b: t.mm(v, p.const([[-1.0, -2.0], [3.0, -4.0]]).float()),
             "linear dtypes": lambda v, b: t.nn.functional.linear(v, p.const([[-1.0, -2.0], [3.0, -4.0]]).float()),
             "mv dtypes": lambda v, b: t.mv(v, p.const([-1.0, -2.0]).float()),
             "add shapes": lambda v, b: v + p.const([1.0, 2.0, 3.0]),
             "mm shapes": lambda v, b: t.mm(v, p.const([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])),
             "cat dims": lambda v, b: t.cat([b, v], 0),
             "where shapes": lambda v, b: t.where(t.tensor([True, False, True]), v, b)}
    for tag, op in cases.items():
        w = p.leaf("w " + tag, [[1.0, 2.0], [3.0, 4.0]])
        h = w * 1
        v = h.view(2, 2)
        h.mul_(2)  # v is stale: its AsStridedBackward0 comes when next read
        b = p.leaf("b " + tag, [1.0, 2.0])
        p.run(tag, lambda op=op, v=v, b=b: op(v, b))
        _made(p, tag + ": after", v)


@program("a grad expanded over size-1 dims (stride 0) is copied into .grad, not adopted: version 1")
def _expanded_size_one_grad(t, p):
    for tag, data in (("[1]", [1.0]), ("[[1]]", [[1.0]]), ("[2]", [1.0, 2.0]), ("0-dim", 1.0)):
        for inputs in (False, True):
            x = p.leaf(f"x {tag} {inputs}", data)
            y = x.sum()
            y.backward(inputs=[x]) if inputs else y.backward()
            p.value(f"{tag} inputs={inputs}", (tuple(x.grad.stride()), x.grad._version))


@program("an op saves what a view needs when the view's base got history after the view was made")
def _view_of_base_with_new_history(t, p):
    ops = {"mul": lambda a, b: a.mul(b), "div": lambda a, b: a / (b + 10), "mm": t.mm, "matmul": t.matmul,
           "addmm": lambda a, b: t.addmm(p.const([1.0, 2.0]), a, b)}
    for tag, op in ops.items():
        x = p.leaf("x " + tag, [[-1.0, -2.0], [3.0, -4.0]])
        c = p.const([[1.0, -2.0], [3.0, -4.0]])
        v = c.view(2, 2)  # made while c needs no grad
        c *= x  # c gets history, so v requires grad (it regenerates when read)
        y = op(c, v)
        p.watch(y)
        g = t.autograd.grad(y.sum(), [x], allow_unused=True)  # the formula for v's slot read an unsaved input
        _made(p, tag, *g)
        w = p.leaf("w " + tag, [[1.0, 2.0], [3.0, 4.0]])
        h = w * 1
        u1, u2 = h.view(2, 2), h.t()
        h.mul_(2)
        with t.no_grad():
            n = w[0:2]  # requires grad, no edge: the other operand is not saved for it
        _made(p, tag + ", two stale views", op(u1, u2))  # regenerated in input order, before the node saves
        _made(p, tag + ", a no_grad view", op(n, u1))


@program("a grad made a leaf by requires_grad_() (a view of the expanded ones) has an edge: others save for it")
def _grad_made_leaf(t, p):
    x = p.leaf("x", [1.0, 2.0, 3.0, -4.0])
    g, = t.autograd.grad(x.sum(), [x])
    g.requires_grad_()
    y = ((g * 2) - x).abs().sum()  # MulBackward0 saved nothing for g: its formula read None before
    p.watch(y)
    y.backward()
    _made(p, "grads", x.grad, g.grad)


@program("pointwise results' strides at size-1 dims are TensorIterator's (matmul's fold decision reads them)")
def _size_one_strides(t, p):
    import random

    rng = random.Random(5)
    for i in range(300):
        shape = [rng.choice([1, 1, 2, 3]) for _ in range(rng.choice([2, 3]))]
        perm = list(range(len(shape)))
        rng.shuffle(perm)
        x = t.arange(float(math.prod(shape)), dtype=t.float64).reshape(*shape).permute(*perm)
        kind = rng.choice(["0-dim", "number", "broadcast", "same", "unsqueezed"])
        y = {"0-dim": lambda: x / t.tensor(2.0, dtype=t.float64), "number": lambda: x * 2,
             "broadcast": lambda: x + t.ones(x.shape[-1], dtype=t.float64), "same": lambda: x + x,
             "unsqueezed": lambda: t.tensor(2.0, dtype=t.float64) - x.unsqueeze(0)}[kind]()
        p.value(f"{i} {kind} {tuple(x.shape)}", tuple(y.stride()))
    v = p.leaf("v", 1.0) / p.const([[-1.0, -2.0, 3.0]]).unsqueeze(2).transpose(1, 2)  # strides (3, 1, 1)
    _made(p, "matmul does not fold it: bmm", v @ p.const([[1.0, 2.0], [-3.0, -4.0], [-5.0, -6.0]]))


@program("backward kernels lay their result out as TensorIterator does: a transposed grad makes a transposed one")
def _backward_result_layouts(t, p):
    F = t.nn.functional
    acts = {"tanh": t.tanh, "sigmoid": t.sigmoid, "relu": t.relu, "gelu": F.gelu, "logsigmoid": F.logsigmoid,
            "abs": t.abs, "sqrt": t.sqrt, "pow": lambda x: x ** 3, "exp": t.exp, "log": t.log, "sin": t.sin,
            "mul": lambda x: x * 2, "div": lambda x: x / 3, "clamp": lambda x: x.clamp(0, 4),
            "softmax": lambda x: x.softmax(1)}
    for tag, f in acts.items():
        x = p.leaf("x " + tag, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        (f(x).T ** 2).mean().backward()  # the grad reaches f's node transposed
        p.value(tag, (x.grad._version, tuple(x.grad.stride())))  # adopted (0) or copied (1) by AccumulateGrad


@program("copy_ makes its node before the kernel refuses shapes; views of inference tensors are no views")
def _copy_seq_and_inference_views(t, p):
    x = p.leaf("x", [[1.0, -2.0, -3.0], [4.0, 5.0, -6.0]])
    c = p.const([-1.0, 2.0, -3.0])
    p.run("copy_ of a (2, 3) into a (3,)", lambda: c.copy_(x[:]))  # CopyBackwards took a seq_nr first
    _made(p, "after", x.sum(-1))
    for tag in ("expand", "view"):
        h = p.leaf("h " + tag, [[1.0, 2.0]]) * 1
        w = p.leaf("w " + tag, 1.0)
        with t.inference_mode():
            a = h.log_softmax(0)
            v = a.expand(3, 2) if tag == "expand" else a.view(2)
        p.value(tag + " is a view", (v._is_view(), v._base is a))
        p.run(tag + " += w", lambda v=v, w=w: v.__iadd__(w))  # overlap, or the inference-tensor write error


@program("relu's backward passes the grad where its result is nan; dot checks dtypes before sizes")
def _relu_nan_dot_order(t, p):
    x = p.leaf("x", [float("nan"), -1.0, 2.0, 0.0])
    t.relu(x).sum().backward()  # threshold_backward zeroes where result <= 0, which nan is not
    _made(p, "grad", x.grad)
    g, = t.autograd.grad(t.relu(x).sum(), [x], create_graph=True)
    _made(p, "create_graph", g)
    p.run("dot of other dtypes and sizes", lambda: p.const([1.0, 2.0]) @ p.const([1.0]).float())


@program("CopySlices lays the base's grad out with the base's strides: writes into views of transposed bases")
def _copy_slices_transposed_base(t, p):
    writes = {"row": lambda b, v: b.__setitem__(0, v), "column": lambda b, v: b.__setitem__((slice(None), 1), v),
              "mul_ on a row": lambda b, v: b[1].mul_(v), "diagonal slice": lambda b, v: b[1:, :2].add_(v)}
    for tag, write in writes.items():
        for layout, make in (("transposed", lambda x: t.t(x) * 1), ("permuted", lambda x: x.permute(1, 0) + 0)):
            x = p.leaf(f"x {tag} {layout}", [[1.0, -2.0, -3.0], [4.0, -5.0, -6.0], [-7.0, 8.0, -9.0]])
            s = x.sum()
            base = make(x)  # laid out (1, 3), as its operand
            write(base, s)
            (base.pow(2) * p.const([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])).sum().backward()
            _made(p, f"{tag}, {layout}", x.grad)  # wrong elements before: a C-ordered grad under the view's strides


@program("as_strided_backward squeezes, sums and scatters as torch's")
def _as_strided_backward(t, p):
    v1 = p.leaf("v1", [1.0, 2.0, -3.0, 4.0])
    v4 = t.unsqueeze(v1.reshape(1, 4), 1)
    with t.no_grad():
        v1.mul_(2)
    v7 = v4.pow(2).sum()
    v7.backward(create_graph=True)
    p.watch(v1.grad)
    _made(p, "grad", v1.grad)
    w = p.leaf("w", [[1.0, -2.0], [3.0, -4.0], [5.0, 6.0]])
    s = w.sum()
    e = s.expand(2)
    s.add_(2)
    y = e @ e
    y.backward(create_graph=True)
    p.watch(w.grad)
    _made(p, "expanded", w.grad)


@program("writes to expanded tensors: fill_, zero_, masked_fill_, index_put_ and set_item")
def _expanded_writes(t, p):
    x = p.leaf("x", [1.0, 2.0, 3.0])
    g, = t.autograd.grad(x.sum(), [x])  # an expanded grad
    p.run("zero_", lambda: g.zero_())
    p.run("fill_", lambda: g.fill_(2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p.run("masked_fill_", lambda: g.masked_fill_(g > 1, 5.0))
        p.run("mask assign", lambda: g.__setitem__(g > 1, 3.0))
        p.run("index_put_", lambda: g.index_put_((t.tensor([0]),), t.tensor(0.5, dtype=g.dtype)))
    p.value("g", (g,))
    p.run("add_", lambda: g.add_(1))
    y = p.leaf("y", 1.0) * 1
    e = y.expand(2, 3)
    p.run("select assign", lambda: e.__setitem__((Ellipsis, 0), 0.0))
    p.run("0-dim select assign", lambda: e[0].__getitem__(0).fill_(1.0))
    same = p.leaf("same", [[1.0, -2.0, 3.0]]).sign().squeeze(0).expand(3)
    p.run("mul_ of an expand to the own shape", lambda: same.__imul__(2))


@program("None and other non-tensors where torch's parser wants a tensor")
def _none_arguments(t, p):
    x = p.const([1.0, 2.0])
    m = p.const([[1.0, 2.0], [3.0, 4.0]])
    cases = {"matmul": lambda: t.matmul(None, x), "x.matmul": lambda: x.matmul(None), "x.matmul(2.0)": lambda: x.matmul(2.0),
             "mm": lambda: t.mm(m, None), "dot": lambda: x.dot(None), "mv": lambda: m.mv(None), "addmm": lambda: t.addmm(x, None, m),
             "exp": lambda: t.exp(None), "sum": lambda: t.sum(None), "add_": lambda: x.add_(None), "copy_": lambda: x.copy_(None),
             "maximum": lambda: x.maximum(None), "cat": lambda: t.cat([x, None]), "stack": lambda: t.stack((None,)),
             "expand_as": lambda: x.expand_as(None), "linear": lambda: t.nn.functional.linear(x, None),
             "mse_loss": lambda: t.nn.functional.mse_loss(x, None), "cross_entropy": lambda: t.nn.functional.cross_entropy(m, None),
             "F.tanh": lambda: t.nn.functional.tanh(None), "F.sigmoid": lambda: t.nn.functional.sigmoid(None),
             "x == None": lambda: x == None, "x != None": lambda: x != None, "x < None": lambda: x < None}  # noqa: E711
    for tag, case in cases.items():
        p.value(tag, p.run(tag, case))


def _permuted_slice(t):
    return t.arange(24.0).reshape(2, 3, 4).permute(1, 2, 0)[:, ::2]


@program("layouts: softmax, layer_norm, masked_fill, cat, advanced indexing")
def _layouts(t, p):
    x = p.const([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]]).t()
    F = t.nn.functional
    for tag, f in {"softmax": lambda: x.softmax(1), "log_softmax": lambda: x.log_softmax(0), "layer_norm": lambda: F.layer_norm(x, (2,)),
                   "logsigmoid": lambda: F.logsigmoid(x), "masked_fill": lambda: x.masked_fill(x > 0, 1.0),
                   "cat": lambda: t.cat([x.unsqueeze(2), x.unsqueeze(2)], 2), "stack": lambda: t.stack([x, x], 2),
                   "index": lambda: t.arange(24.0).reshape(2, 3, 4)[:, t.tensor([0, 2])],
                   "index size-1": lambda: p.const([[1.0, 2.0, -3.0], [-4.0, -5.0, 6.0]])[:, t.tensor([2])],
                   # preserve_format copies of tensors that are not dense: TensorIterator's order, not C order
                   "clone of expanded": lambda: p.const([[1.0, -2.0, 3.0]]).expand(2, 1, 3).clone(),
                   "clone of expanded, transposed": lambda: t.arange(6.0).reshape(2, 1, 3).expand(2, 5, 3)
                   .transpose(0, 2).clone(),
                   "empty_like of a permuted slice": lambda: t.empty_like(_permuted_slice(t)).zero_(),
                   "ones_like of a permuted slice": lambda: t.ones_like(_permuted_slice(t))}.items():
        r = f()
        p.value(tag, (tuple(r.stride()), r.is_contiguous()))
        p.run(tag + " view", lambda r=r: r.view(-1))
    v = p.leaf("v", [[1.0, -2.0, 3.0]]).expand(2, 1, 3).clone()
    w, b = p.const([[1.0, 0.5, -1.0], [2.0, -0.5, 0.25]]), p.const([0.5, -1.0])
    _made(p, "linear on the clone of an expanded tensor takes the view path", t.nn.functional.linear(v, w, b))
    p.run("gather with a smaller index", lambda: p.const([[1.0, 2.0], [3.0, 4.0]]).gather(1, t.tensor([[1, 0]])))
    p.run("gather out of range", lambda: p.const([[1.0, 2.0], [3.0, 4.0]]).gather(1, t.tensor([[2]])))
    w = p.leaf("w", [[1.0, 2.0, 3.0, 4.0]])
    p.run("copy_ into a leaf that does not fit", lambda: w.copy_(p.const([1.0, 2.0])))
    p.run("addmm bias that does not expand", lambda: t.addmm(p.const([1.0, 2.0, 3.0]), m2 := p.const([[1.0, 2.0]]), m2.t()))


@program("reflected operators with operands torch cannot take: / makes the reciprocal first (fuzzer seed 7070023812)")
def _reflected_unsupported(t, p):
    v = p.leaf("v", [2.0, 4.0])
    cases = {"None / v": lambda: None / v, "'a' / v": lambda: "a" / v, "[1.0] / v": lambda: [1.0] / v,
             "None - v": lambda: None - v, "None ** v": lambda: None ** v, "None // v": lambda: None // v,
             "None % v": lambda: None % v, "None @ v": lambda: None @ v, "None * v": lambda: None * v,
             "None + v": lambda: None + v, "2 / v": lambda: 2 / v}
    for tag, case in cases.items():
        p.run(tag, case)
        _made(p, tag + ", then a node", v.sub(v, alpha=0.5))
