"""Where traces come from: the engine's Recorder and the real-PyTorch bridge, behind one TraceSource protocol.

The top stage: may import any other. torch is imported only by `sources/torch/bridge.py` and its helpers, when a
recording starts.
"""
