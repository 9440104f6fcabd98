"""Forward ops: compute with numpy and, when grad mode is on and an input requires grad, record a node.

Each op follows PyTorch's generated code: create the node
(taking a seq_nr) and save its inputs (save_inputs), check and compute, then attach edges and history and save its
outputs (record). Node names and edge slots are the ones
PyTorch 2.13 records; tests/engine/test_torch_parity.py compares them with real torch.
"""
from __future__ import annotations

from .._tensor import make_tensor
from ._common import (
                    _out,  # noqa: E402,F401 - used by the Tensor method table
                    collect_next_edges,
                    needs_grad,
                    record,
                    result_dtype,
                    scalar_tensor,
                    with_original_self,
)
from .arith import (
                    add,
                    add_scalar,
                    compare,
                    div,
                    div_scalar,
                    isnan,
                    logical_and,
                    logical_not,
                    logical_or,
                    mul,
                    mul_scalar,
                    neg,
                    pow,
                    rdiv,
                    reciprocal,
                    rsub,
                    sub,
                    sub_scalar,
)
from .formulas import (
                    as_strided_backward,
                    empty_like_geometry,
                    log_softmax_backward_data,
                    mse_loss_backward,
                    select_backward,
                    sigmoid_backward,
                    slice_backward,
                    softmax_backward_data,
                    sum_to,
                    tanh_backward,
                    threshold_backward,
                    zeros_like_data,
                    zeros_scalar,
)
from .linalg import addmm, bmm, dot, linear, matmul, mm, mv
from .nn import log_softmax, masked_fill, mse_loss, softmax, where
from .pointwise import (
                    abs,
                    clamp,
                    clamp_max,
                    clamp_min,
                    cos,
                    exp,
                    expm1,
                    log,
                    log1p,
                    relu,
                    sgn,
                    sigmoid,
                    sign,
                    sin,
                    sqrt,
                    square,
                    tanh,
)
from .reduce import (
                    MaxResult,
                    MinResult,
                    all,
                    any,
                    argmax,
                    argmin,
                    logsumexp,
                    max,
                    maximum,
                    mean,
                    min,
                    norm,
                    std,
                    sum,
                    var,
)
from .scatter import gather, scatter, scatter_add, zeros_of
from .shape import (
                    _unsafe_view,
                    alias,
                    as_strided,
                    cat,
                    chunk,
                    clone,
                    contiguous,
                    copy_to_new,
                    expand,
                    flatten,
                    getitem,
                    index,
                    index_add,
                    index_key,
                    index_put_accumulate,
                    index_select,
                    permute,
                    reshape,
                    select,
                    slice_,
                    split,
                    squeeze,
                    squeeze_dims,
                    stack,
                    t,
                    to,
                    transpose,
                    unbind,
                    unsqueeze,
                    view,
)

__all__ = [name for name in dir() if not name.startswith("__")]
