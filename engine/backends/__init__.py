"""`torch.backends` as a CPU-only torch on Linux answers it: no MPS, no cuDNN; the flags scripts set are plain
attributes with torch's defaults."""
from __future__ import annotations

import types

mps = types.ModuleType("torch.backends.mps", "No MPS backend.")
mps.is_available = lambda: False  # type: ignore[attr-defined]
mps.is_built = lambda: False  # type: ignore[attr-defined]

cudnn = types.ModuleType("torch.backends.cudnn", "No cuDNN; the flags keep torch's defaults.")
cudnn.is_available = lambda: False  # type: ignore[attr-defined]
cudnn.enabled = True  # type: ignore[attr-defined]
cudnn.deterministic = False  # type: ignore[attr-defined]
cudnn.benchmark = False  # type: ignore[attr-defined]
cudnn.allow_tf32 = True  # type: ignore[attr-defined]

cuda = types.ModuleType("torch.backends.cuda", "No CUDA; the flags keep torch's defaults.")
cuda.matmul = types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True)  # type: ignore[attr-defined]
cuda.is_built = lambda: False  # type: ignore[attr-defined]

mkldnn = types.ModuleType("torch.backends.mkldnn", "oneDNN, as a CPU torch on Linux has it: `enabled` picks nn.LSTM's "
                          "float32 path (one MkldnnRnnLayerBackward0 per layer, or per-step nodes when False).")
mkldnn.is_available = lambda: True  # type: ignore[attr-defined]
mkldnn.enabled = True  # type: ignore[attr-defined]

__all__ = ["mps", "cudnn", "cuda", "mkldnn"]
