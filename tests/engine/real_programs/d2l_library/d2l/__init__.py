# Vendored from https://github.com/d2l-ai/d2l-en, d2l/__init__.py, tag v0.17.6 (commit 0f920da87c3d3eb6a6802469fd3e89b7d4f43160); unedited.
"""Saved source code for "Dive into Deep Learning" (https://d2l.ai).

Please import d2l by one of the following ways:

from d2l import mxnet as d2l  # Use MXNet as the backend
from d2l import torch as d2l  # Use PyTorch as the backend
from d2l import tensorflow as d2l  # Use TensorFlow as the backend
from d2l import paddle as d2l  # Use PaddlePaddle as the backend

"""

__version__ = "0.17.6"
