"""agdb's differential fuzzer: random programs run on real torch 2.13 and on `engine`, compared event by event,
failures shrunk to minimal repros (`python -m tests.fuzz --seed S -n N`, `make fuzz`)."""
