"""engine.optim: PyTorch 2.13's Optimizer, SGD, Adam, AdamW, RMSprop and Adagrad
(single-tensor, foreach=False semantics).

The updates run under no_grad with in-place writes to the parameters and their state, in PyTorch's order
and with its arithmetic, so parameters, state and `_version` counters match torch.optim's step by step.
"""
from __future__ import annotations

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .lbfgs import LBFGS
from .optimizer import Optimizer, required
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["lr_scheduler", "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS", "required"]
