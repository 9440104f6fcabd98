"""Module backward hooks, run on engine and torch by test_module_hooks_parity.py.

A module with full backward hooks (or backward pre-hooks) wraps its tensor inputs and outputs in
BackwardHookFunction: the programs watch those BackwardHookFunctionBackward nodes (names, seq_nrs,
next_functions), log each hook call among the watched nodes' runs, record grad_input/grad_output (None for
non-tensor arguments), replacement grads, and torch's errors: wrong-sized hook results, mixing hook kinds,
and in-place writes into the views the wrapping makes. The deprecated register_backward_hook and the global
hooks of torch.nn.modules.module are here too (only full global backward hooks: once registered, torch's
global kind can never change in the process).
"""
from __future__ import annotations

from typing import Callable

PROGRAMS: dict[str, Callable] = {}

A23 = [[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]
W23 = [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]
B2 = [0.05, -0.15]
V3 = [0.3, -0.8, 1.4]
W3 = [1.2, -0.5, 0.8]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _linear(t, p, tag="lin"):
    lin = t.nn.Linear(3, 2, dtype=t.float64)
    lin.load_state_dict({"weight": p.const(W23), "bias": p.const(B2)})
    for name, param in lin.named_parameters():
        p.labels[id(param)] = f"{tag}.{name}"
    return lin


def _logger(p, tag):
    """A full backward hook that records its arguments."""
    def hook(module, grad_input, grad_output):
        p.value(f"{tag} grad_input", grad_input)
        p.value(f"{tag} grad_output", grad_output)
    return hook


def _pre_logger(p, tag):
    def hook(module, grad_output):
        p.value(f"{tag} grad_output", grad_output)
    return hook


def _mul_module(t):
    class Mul(t.nn.Module):
        def forward(self, a, b=None, k=2.0):
            return a * k if b is None else a * b
    return Mul()


@program("module_full_backward_hook_linear")
def _full_linear(t, p):
    """Linear with a full hook and a pre-hook: BackwardHookFunction nodes around addmm, and the hook order among
    the nodes' runs and the tensor hooks."""
    lin = _linear(t, p)
    lin.register_full_backward_hook(_logger(p, "full"))
    lin.register_full_backward_pre_hook(_pre_logger(p, "pre"))
    x = p.leaf("x", A23)
    p.counter("before call")
    y = lin(x)
    p.counter("after call")
    p.watch(y)
    y.register_hook(lambda g: p.value("tensor hook y", g))
    x.register_hook(lambda g: p.value("tensor hook x", g))
    loss = (y * y).sum()
    p.run("backward", loss.backward)
    p.value("grads", (x.grad, lin.weight.grad, lin.bias.grad))
    p.counter("end")


@program("module_backward_hook_replacements")
def _replacements(t, p):
    """The pre-hook scales grad_output, the full hooks (prepend=True first) scale grad_input: x.grad and the
    parameters' grads change accordingly."""
    lin = _linear(t, p)
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 10,))
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0] + 1,))
    lin.register_full_backward_hook(lambda m, gi, go: (p.value("first", gi), None)[1], prepend=True)
    lin.register_full_backward_hook(lambda m, gi, go: p.value("last", (gi, go)))
    x = p.leaf("x", A23)
    y = lin(x)
    p.watch(y)
    y.sum().backward()
    p.value("grads", (x.grad, lin.weight.grad, lin.bias.grad))


@program("module_backward_hook_mixed_arguments")
def _mixed_arguments(t, p):
    """Tensors that do not require grad and non-tensor arguments: None entries in grad_input, and zeros for the
    constant tensor (it passes through BackwardHookFunction as a non-differentiable output)."""
    m = _mul_module(t)
    m.register_full_backward_hook(_logger(p, "hook"))
    x = p.leaf("x", V3)
    c = p.const(W3)
    y = m(c, x)
    p.watch(y)
    y.sum().backward()
    z = m(x, None, 3.0)
    p.watch(z, tag="number")
    z.sum().backward()
    w = m(x, k=4.0)  # keyword arguments are not wrapped
    p.watch(w, tag="keyword")
    w.sum().backward()
    p.value("x.grad", x.grad)


@program("module_backward_hook_no_input_requires_grad")
def _no_input_grad(t, p):
    """No input requires grad: the full hook fires at the outputs' node with grad_input (None,); a hook that
    returns grads there is refused."""
    lin = _linear(t, p)
    lin.register_full_backward_hook(_logger(p, "hook"))
    c = p.const(A23)
    y = lin(c)
    p.watch(y)
    y.sum().backward()
    lin.register_full_backward_hook(lambda m, gi, go: (go[0],))
    p.run("returns a grad", lambda: lin(c).sum().backward())
    p.value("weight.grad", lin.weight.grad)


@program("module_backward_hook_outputs")
def _outputs(t, p):
    """A tuple of outputs, one detached and one not a tensor: grad_output has None for both."""
    class Two(t.nn.Module):
        def forward(self, a):
            return a * 2, a.detach() + 1, 5

    m = Two()
    m.register_full_backward_hook(_logger(p, "hook"))
    m.register_full_backward_pre_hook(_pre_logger(p, "pre"))
    x = p.leaf("x", V3)
    a, b, k = m(x)
    p.value("outputs", (a, b, k))
    p.watch(a)
    a.sum().backward()
    p.value("x.grad", x.grad)


@program("module_backward_hook_nested_modules")
def _nested(t, p):
    """Hooks on a Sequential and on its layers: inner hooks fire first, each where its module's inputs get
    their grads."""
    nn = t.nn
    model = nn.Sequential(_linear(t, p, "l1"), nn.Tanh())
    for name, module in [("seq", model), ("lin", model[0]), ("tanh", model[1])]:
        module.register_full_backward_hook(_logger(p, name))
        module.register_full_backward_pre_hook(_pre_logger(p, name + " pre"))
    x = p.leaf("x", A23)
    y = model(x)
    p.watch(y)
    y.sum().backward()
    p.value("x.grad", x.grad)


@program("module_backward_hook_registered_at_call_time")
def _registered_at_call(t, p):
    """The hooks a call runs are those registered when it started: removing one after the call does not stop
    it, adding one after the call does not run it; calling twice makes two sets of nodes."""
    lin = _linear(t, p)
    handle = lin.register_full_backward_hook(lambda m, gi, go: p.value("removed later", gi))
    x = p.leaf("x", A23)
    y1 = lin(x)
    handle.remove()
    lin.register_full_backward_hook(lambda m, gi, go: p.value("added later", gi))
    y2 = lin(x)
    p.watch(y1, y2)
    (y1.sum() + y2.sum()).backward()
    p.counter("end")


@program("module_backward_hook_errors")
def _errors(t, p):
    """Wrong-sized hook results, and mixing the deprecated and the full kind on one module."""
    lin = _linear(t, p)
    x = p.leaf("x", A23)
    h = lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    p.run("full hook returns two", lambda: lin(x).sum().backward())
    h.remove()
    h = lin.register_full_backward_pre_hook(lambda m, go: ())
    p.run("pre-hook returns none", lambda: lin(x).sum().backward())
    h.remove()
    h = lin.register_full_backward_hook(lambda m, gi, go: (gi[0][:1],))
    p.run("full hook changes a size", lambda: lin(x).sum().backward())
    p.run("deprecated after full", lambda: lin.register_backward_hook(lambda m, gi, go: None))
    other = _linear(t, p, "other")
    other.register_backward_hook(lambda m, gi, go: None)
    p.run("full after deprecated", lambda: other.register_full_backward_hook(lambda m, gi, go: None))
    p.counter("end")


@program("module_backward_hook_in_place_errors")
def _in_place(t, p):
    """Writing in place into the views a hooked module hands out is refused, as torch's custom-Function views
    are; a write through an indexed view first makes the view's node. Without grad recording it is allowed."""
    lin = _linear(t, p)
    lin.register_full_backward_hook(lambda m, gi, go: None)
    x = p.leaf("x", A23)
    p.counter("start")
    p.run("add_ on output", lambda: lin(x).add_(1))
    p.counter("after add_")
    p.run("setitem int on output", lambda: lin(x).__setitem__(0, 1.0))
    p.counter("after setitem int")
    p.run("setitem slice on output", lambda: lin(x).__setitem__(slice(0, 1), 1.0))
    p.run("setitem two ints on output", lambda: lin(x).__setitem__((0, 1), 1.0))
    p.run("setitem all on output", lambda: lin(x).__setitem__(Ellipsis, 1.0))
    p.run("zero_ on output", lambda: lin(x).zero_())
    p.run("detach_ on output", lambda: lin(x).detach_())
    p.counter("after setitems")
    with t.no_grad():
        y = lin(x)
        p.run("add_ under no_grad", lambda: y.add_(1))

    class InPlace(t.nn.Module):
        def forward(self, a, b):
            a.mul_(2)
            return a + b

    m = InPlace()
    m.register_full_backward_hook(lambda mod, gi, go: None)
    p.run("forward writes into its input", lambda: m(x * 1, p.const(A23)))
    p.run("forward writes into one of two inputs", lambda: m(x * 1, x * 2))
    p.counter("end")


@program("module_backward_hook_double_backward")
def _double_backward(t, p):
    """grad with create_graph through a hooked module, then a second backward: the hooks of the first pass ran
    once; in the second the grads reach the inputs' node without passing the outputs', and the hook is skipped."""
    m = _mul_module(t)
    m.register_full_backward_hook(_logger(p, "hook"))
    x = p.leaf("x", V3)
    y = m(x, x)
    (g,) = t.autograd.grad(y.sum(), x, create_graph=True)
    p.value("g", g)
    p.watch(g)
    g.sum().backward()
    p.value("x.grad", x.grad)


@program("module_deprecated_backward_hook")
def _deprecated(t, p):
    """register_backward_hook: a post-hook on the first output's node, which sees that node's grads (Linear's
    AddmmBackward0: bias, input and weight.T) and may replace them."""
    lin = _linear(t, p)
    lin.register_backward_hook(lambda m, gi, go: p.value("grads of addmm", (gi, go)))
    lin.register_backward_hook(lambda m, gi, go: (gi[0] * 0, gi[1], gi[2]))
    x = p.leaf("x", A23)
    y = lin(x)
    p.counter("after call")
    p.watch(y)
    y.sum().backward()
    p.value("grads", (x.grad, lin.weight.grad, lin.bias.grad))


@program("module_global_hooks")
def _global(t, p):
    """The global hooks of torch.nn.modules.module run for every module, before the module's own."""
    mm = t.nn.modules.module
    lin = _linear(t, p)
    lin.register_forward_pre_hook(lambda m, args: p.value("own forward pre", args))
    lin.register_forward_hook(lambda m, args, out: p.value("own forward", out))
    lin.register_full_backward_hook(lambda m, gi, go: p.value("own full", gi))
    lin.register_full_backward_pre_hook(lambda m, go: p.value("own pre", go))
    handles = [
        mm.register_module_forward_pre_hook(lambda m, args: p.value("global forward pre", args)),
        mm.register_module_forward_hook(lambda m, args, out: p.value("global forward", out)),
        mm.register_module_forward_hook(lambda m, args, kwargs, out: p.value("global kwargs", kwargs),
                                        with_kwargs=True),
        mm.register_module_full_backward_pre_hook(lambda m, go: p.value("global pre", go)),
        mm.register_module_full_backward_hook(lambda m, gi, go: p.value("global full", gi)),
    ]
    try:
        x = p.leaf("x", A23)
        y = lin(x)
        p.watch(y)
        y.sum().backward()
        tanh = t.nn.Tanh()  # a module with no hooks of its own
        z = tanh(x)
        p.watch(z, tag="tanh")
        z.sum().backward()
    finally:
        for handle in handles:
            handle.remove()
        # torch's handle of a with_kwargs global hook leaves the hook's id in _global_forward_hooks_with_kwargs
        # (its extra_dict is the always_call dict). Left there, it makes every later torch.compile(module) in this
        # test process warn of global hooks on modules, whatever test runs it.
        getattr(mm, "_global_forward_hooks_with_kwargs", {}).pop(handles[2].id, None)
    w = t.nn.Tanh()(x)
    p.watch(w, tag="after removal")
    p.value("x.grad", x.grad)


@program("custom_function_inputs_returned_as_is")
def _returned_as_is(t, p):
    """The mechanism under the hooks: a custom Function's inputs returned as-is are views that refuse in-place
    writes with grad recording; with several differentiable outputs the reason given is another."""
    class Id(t.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
            return args

        @staticmethod
        def backward(ctx, *args):
            return args

    x = p.leaf("x", V3)
    c = p.const(W3)
    y, d = Id.apply(x * 1, c)
    p.watch(y)
    p.value("outputs", (y, d))
    p.run("differentiable output", lambda: y.add_(1))
    p.run("non-differentiable output, grad operand", lambda: d.add_(x))
    p.run("non-differentiable output, no grad", lambda: d.add_(1))
    a, b, e = Id.apply(x * 1, x * 2, c)
    p.run("one of two differentiable", lambda: b.mul_(2))
    p.run("select of one of two", lambda: a.__setitem__(0, 1.0))
    p.run("non-differentiable beside two", lambda: e.add_(x))
    with t.no_grad():
        (z,) = Id.apply(x)
    p.run("made under no_grad", lambda: z.add_(1))
    p.value("z", z)
    p.counter("end")
