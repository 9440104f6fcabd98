"""Gradient clipping and learning-rate schedulers, run on engine and torch by test_schedule_parity.py. Each is
`fn(t, p)`; see parity.py.

Clipping runs under no_grad (no node, no seq_nr) and scales or clamps each grad in place (torch's foreach kernels
on CPU: one version per kernel); schedulers' learning rates are compared after each of 20 steps.
"""
from __future__ import annotations

import math
from typing import Callable

PROGRAMS: dict[str, Callable] = {}


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _params_with_grads(t, p):
    w = t.nn.Parameter(t.tensor([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]))
    b = t.nn.Parameter(t.tensor([0.1, -0.2]))
    unused = t.nn.Parameter(t.tensor([1.0]))
    p.labels.update({id(w): "w", id(b): "b", id(unused): "unused"})
    x = t.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    loss = ((x @ w.t() + b) ** 2).sum()
    loss.backward()
    return w, b, unused


@program("clip_grad_norm_: total norm, scaled grads, versions, no node")
def _clip_norm(t, p):
    clip = t.nn.utils
    w, b, unused = _params_with_grads(t, p)
    p.counter("after backward")
    norm = clip.clip_grad_norm_([w, b, unused], max_norm=1.0)
    p.made("norm", norm)
    p.made("grads", w.grad, b.grad)
    p.counter("after clip")
    p.made("large max_norm leaves them", clip.clip_grad_norm_([w, b], 100.0), w.grad)
    p.made("inf norm", clip.clip_grad_norm_(w, 0.5, norm_type="inf"), w.grad)
    p.made("norm 1 over a generator", clip.clip_grad_norm_((q for q in [w, b]), 0.3, norm_type=1.0), w.grad, b.grad)
    p.made("no grads", clip.clip_grad_norm_([unused], 1.0))
    p.made("get_total_norm", clip.get_total_norm([w.grad, b.grad]))
    clip.clip_grads_with_norm_([w, b], 0.1, t.tensor(2.0))
    p.made("clip_grads_with_norm_", w.grad, b.grad)
    w.grad[0, 0] = float("inf")
    p.run("nonfinite", lambda: clip.clip_grad_norm_([w], 1.0, error_if_nonfinite=True))
    p.made("nonfinite scaled", clip.clip_grad_norm_([w], 1.0), w.grad)
    p.counter("end")


@program("clip_grad_value_: clamped grads, versions, no node")
def _clip_value(t, p):
    w, b, unused = _params_with_grads(t, p)
    t.nn.utils.clip_grad_value_([w, b, unused], clip_value=5.0)
    p.made("grads", w.grad, b.grad)
    t.nn.utils.clip_grad_value_(b, 1)
    p.made("one tensor", b.grad)
    p.run("no grads at all", lambda: t.nn.utils.clip_grad_value_([unused], 1.0))
    p.run("no parameters", lambda: t.nn.utils.clip_grad_value_([], 1.0))
    p.counter("end")


@program("a training step with clipping under a module")
def _clip_in_loop(t, p):
    model = t.nn.Linear(3, 2)
    with t.no_grad():
        model.weight.copy_(t.tensor([[0.5, -1.2, 2.0], [1.5, 0.3, -0.7]]))
        model.bias.copy_(t.tensor([0.1, -0.2]))
    opt = t.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = t.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    for step in range(3):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        p.watch(loss, tag=f"loss {step}")
        loss.backward()
        p.made(f"norm {step}", t.nn.utils.clip_grad_norm_(model.parameters(), 0.5))
        opt.step()
        p.made(f"params {step}", model.weight, model.bias)
    p.counter("end")


def _opt(t, lr=0.1, **kw):
    w = t.nn.Parameter(t.tensor([1.0, -2.0]))
    return t.optim.SGD([w], lr=lr, **kw), w


def _run(t, p, name, sched, opt, w, steps=20):
    lrs = []
    for _ in range(steps):
        w.grad = t.tensor([0.5, 0.25])
        opt.step()
        sched.step()
        lrs.append(tuple(sched.get_last_lr()) + tuple(g["lr"] for g in opt.param_groups))
    p.value(name, lrs)
    p.value(name + " state", sorted((k, repr(v)) for k, v in sched.state_dict().items()
                                   if k not in ("lr_lambdas", "_get_lr_called_within_step")))
    p.value(name + " param", w)


@program("StepLR, MultiStepLR, ExponentialLR over 20 steps")
def _step_family(t, p):
    s = t.optim.lr_scheduler
    opt, w = _opt(t)
    _run(t, p, "StepLR", s.StepLR(opt, step_size=3, gamma=0.5), opt, w)
    opt, w = _opt(t)
    _run(t, p, "MultiStepLR", s.MultiStepLR(opt, milestones=[2, 5, 5, 11], gamma=0.3), opt, w)
    opt, w = _opt(t, lr=0.2)
    _run(t, p, "ExponentialLR", s.ExponentialLR(opt, gamma=0.9), opt, w)
    opt, w = _opt(t)
    p.value("initial_lr", (opt.param_groups[0].get("initial_lr"), opt.param_groups[0]["lr"]))
    sched = s.StepLR(opt, 2)
    p.value("after init", (opt.param_groups[0]["initial_lr"], sched.last_epoch, sched.get_last_lr(), sched.base_lrs))
    p.run("not an optimizer", lambda: s.StepLR(object(), 2))


@program("CosineAnnealingLR and LambdaLR over 20 steps, two param groups")
def _cosine_lambda(t, p):
    s = t.optim.lr_scheduler
    opt, w = _opt(t, lr=0.3)
    _run(t, p, "Cosine", s.CosineAnnealingLR(opt, T_max=7, eta_min=0.01), opt, w, steps=25)
    opt, w = _opt(t)
    _run(t, p, "Cosine no min", s.CosineAnnealingLR(opt, T_max=20), opt, w)
    a, b = t.nn.Parameter(t.tensor([1.0])), t.nn.Parameter(t.tensor([2.0]))
    opt = t.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    sched = s.LambdaLR(opt, [lambda e: 0.95 ** e, lambda e: 1.0 / (1 + e)])
    lrs = []
    for _ in range(20):
        opt.step()
        sched.step()
        lrs.append(tuple(sched.get_last_lr()))
    p.value("LambdaLR", lrs)
    opt, w = _opt(t)
    _run(t, p, "LambdaLR warmup", s.LambdaLR(opt, lambda e: min(1.0, (e + 1) / 5)), opt, w)
    p.run("wrong lambda count", lambda: s.LambdaLR(opt, [lambda e: 1.0, lambda e: 1.0]))


@program("OneCycleLR with SGD momentum and Adam betas")
def _one_cycle(t, p):
    s = t.optim.lr_scheduler
    opt, w = _opt(t, momentum=0.9)
    _run(t, p, "OneCycle cos", s.OneCycleLR(opt, max_lr=1.0, total_steps=20), opt, w)
    p.value("momentum", opt.param_groups[0]["momentum"])
    w2 = t.nn.Parameter(t.tensor([1.0, -2.0]))
    opt2 = t.optim.Adam([w2], lr=0.01)
    _run(t, p, "OneCycle linear three-phase", s.OneCycleLR(opt2, max_lr=0.1, epochs=4, steps_per_epoch=6,
                                                           anneal_strategy="linear", three_phase=True), opt2, w2)
    p.value("betas", opt2.param_groups[0]["betas"])
    opt3, w3 = _opt(t, momentum=0.9)
    sched = s.OneCycleLR(opt3, max_lr=0.5, total_steps=3)
    for _ in range(3):
        opt3.step()
    p.run("past total_steps", lambda: [sched.step() for _ in range(4)])
    p.run("no steps", lambda: s.OneCycleLR(opt3, max_lr=0.5))
    opt4, _ = _opt(t)
    p.run("no momentum", lambda: s.OneCycleLR(t.optim.Adagrad([t.nn.Parameter(t.ones(1))]), max_lr=0.5,
                                             total_steps=3))
    del opt4


@program("ReduceLROnPlateau over 20 metrics")
def _plateau(t, p):
    s = t.optim.lr_scheduler
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.97, 0.8, 0.81, 0.82, 0.83, 0.84, 0.85, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6,
               0.6, 0.6]
    for kwargs in ({"patience": 2}, {"mode": "max", "factor": 0.5, "patience": 1, "cooldown": 2},
                   {"threshold_mode": "abs", "threshold": 0.05, "patience": 0, "min_lr": 0.02}):
        opt, w = _opt(t)
        sched = s.ReduceLROnPlateau(opt, **kwargs)
        lrs = []
        for m in metrics:
            opt.step()
            sched.step(t.tensor(m) if m < 0.9 else m)
            lrs.append((tuple(sched.get_last_lr()), sched.num_bad_epochs, sched.cooldown_counter, sched.best))
        p.value(f"plateau {sorted(kwargs)}", lrs)
    opt, _ = _opt(t)
    p.run("factor", lambda: s.ReduceLROnPlateau(opt, factor=1.0))
    p.run("mode", lambda: s.ReduceLROnPlateau(opt, mode="up"))
    p.value("inf", math.isinf(s.ReduceLROnPlateau(opt).best))
