"""The forward's seq_nr increments: each put on the user's line that caused it (seen by the line tracer, lines.py,
or around each torch call by the mode, patching.py), named, and written to the builder; increments nobody saw
(gaps) are written unnamed until a walk meets their node.

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import sys
from typing import Any

import torch

from agdb.tracer.recording import culprits
from agdb.tracer.recording.builder import CHUNK, ROW, Bump, NodeFacts
from agdb.tracer.recording.frames import columns_at, source_line
from agdb.tracer.sources.torch.compiling import is_compile_time
from agdb.tracer.sources.torch.naming import is_library, node_names
from agdb.tracer.sources.torch.state import BUMP, LATE, RENUMBER, BridgeState, ThreadState
from agdb.tracer.store.schema import Kind

_seq = torch.autograd._get_sequence_nr
_getframe = sys._getframe
_TENSOR = torch.Tensor
_new = tuple.__new__  # NodeFacts and Bump made without their class's Python-level __new__ (NOTE [builder fast path])
_K_BUMP, _K_CREATED = int(Kind.SEQ_NR_BUMPED), int(Kind.NODE_CREATED)


class Forward:
    """Writes the increments of the counter: the hot path of the forward (NOTE [forward hot path]), and the gaps."""

    def __init__(self, shared: BridgeState) -> None:
        self.b = shared.b
        self.raw = shared.raw
        self._local = shared.local
        self._keys = shared.keys
        self._seq_keys = shared.seq_keys
        self._unnamed = shared.unnamed
        self.type_names = shared.type_names
        self._frames: dict[tuple, int] = {}
        self._fast_frames: dict[tuple, int] = {}  # (user code, bytecode offset) -> frame row (NOTE [forward hot path])
        self._skip: dict[int, bool] = {}  # id(code) -> whether it is a library's
        self._codes: list = []  # the code objects keyed by id (NOTE [code keys] in line_table.py)
        self.thread_state = shared.thread_state  # this thread's ThreadState
        self._compile_seqs = shared.compile_seqs  # NOTE [numbers taken while compiling] in compiling.py
        self.log_culprits = False  # whether `agdb.seq_nr` logs each increment as it is written (read at attach)
        self.calls: Any = None  # the module calls running (ModuleCalls, NOTE [module paths]), while attached
        self._module_rows: dict[tuple[int, str], int] = {}  # (frame row, module path) -> frame row

    # -- what the forward sees -------------------------------------------------------------------------------------
    def op_bumped(self, func: Any, out: Any, before: int) -> None:
        """`func` took numbers from `before` on: name them from its outputs, put them on the user's line.

        NOTE [forward hot path]
        One op, one node, called from the user's own code, nothing pending: the common case, written straight to
        the builder's rows (NOTE [builder fast path]) with the frame row cached by (code, bytecode offset) and
        the node's name by its Python type, so that no frame walk, no name() call and no call of ours is made.
        """
        try:
            state = self._local.state
        except AttributeError:
            state = self.thread_state()
        after = _seq()
        last = state.last
        start = before if before > last else last  # a backward inside `func` accounted for its own
        state.last = after
        if start >= after:
            return
        f = _getframe(2)  # the caller of __torch_function__
        code = f.f_code
        calls = self.calls
        module = calls.current() if calls is not None else ""
        frame = self._fast_frames.get((id(code), f.f_lasti, module)) if self._skip.get(id(code)) is False else None
        if frame is None:
            frame = self.user_frame(module)
            if self._skip.get(id(code)) is False:
                self._fast_frames[(id(code), f.f_lasti, module)] = frame
        del f
        if after - start == 1 and type(out) is _TENSOR:
            gf = out.grad_fn
            if gf is not None and gf._sequence_nr() == start:
                name = self.type_names.get(type(gf))
                if name is None:
                    name = self.type_names[type(gf)] = gf.name()
                del gf
                self.bump_one(state, start, name, frame)
                return
        self.bumps(state, start, after, node_names(func, out, start, after), frame)

    def bump_one(self, state: ThreadState, start: int, name: str, frame: int) -> None:
        """One increment, `start`, on `frame`: the hot path of both ways of seeing the forward (NOTE [forward hot
        path]), written straight to the builder's rows when nothing is pending."""
        if start == state.rlast and not state.log and not state.calls:
            row = state.row
            keys = self._seq_keys[row]
            if keys.get(start) is not None:  # a walk met a node with this number first
                self.bump(row, start, name, frame)
            else:  # bump's rows; no entry in the bumps, read only for a node whose facts lack a frame
                key = keys[start] = next(self._keys)
                raw = self.raw
                rows = raw.rows
                raw.node_facts[key] = _new(NodeFacts, (name, start, 0, "cpu", row, (), frame, self.b.num_events + 1, 1))
                rows.extend((_K_BUMP, row, 0, key, 0, 0, 0, _K_CREATED, row, 0, key, 0, 0, 0))
                if len(rows) >= CHUNK * ROW:
                    self.b.freeze_rows()
                if self.log_culprits:
                    self.log(start, name, frame)
            state.rlast = start + 1
        else:
            self.bumps(state, start, start + 1, name, frame)

    def function_applied(self, cls: type, args: tuple) -> None:
        """A custom Function's apply begins: its PyNode takes the counter's value now. It joins a graph only when grad
        mode is on and an input needs a grad (torch's `is_executable`): otherwise no NodeCreated is written, as
        agdb's engine writes none for it, and the views flag it `no_graph` (NOTE [seq_nr anomalies])."""
        state = self.thread_state()
        now = _seq()
        state.last = now + 1
        joins = torch.is_grad_enabled() and any(isinstance(a, _TENSOR) and a.requires_grad for a in args)
        module = self.calls.current() if self.calls is not None else ""
        self.bumps(state, now, now + 1, f"{cls.__name__}Backward", self.user_frame(module), joins)

    def write_seen(self, state: ThreadState) -> None:
        """Write the increments the line tracer only noted (NOTE [line culprits]): before anything else is."""
        seen = state.seen
        if seen:
            state.seen = []
            state.seen_unnamed = {}
            ranges = self._compile_seqs.get(state.row) if self._compile_seqs else None
            if ranges:  # lines torch ran while it compiled (a nested region's function): no node of the program's
                seen = [e for e in seen if not is_compile_time(ranges, e[0])]  # (NOTE [numbers taken while compiling])
            bump_one, bump = self.bump_one, self.bump
            for start, name, frame in seen:
                if name == "?":  # bump keeps it among the unnamed, for late_names or a walk to name
                    self.gap(state, start, frame)
                    bump(state.row, start, name, frame)
                    state.rlast = start + 1
                else:
                    bump_one(state, start, name, frame)

    def late_names(self, state: ThreadState, names: dict[int, str]) -> None:
        """Nodes bumped as `?` (seq_nr -> name) met later by a line that kept what they led to (NOTE [line
        culprits]); while a log waits, named when the replay has written their increments."""
        self.write_seen(state)
        if state.log or state.calls:
            state.log.append((LATE, names, state))  # its thread: NOTE [pool thread]
            return
        self.name_late(state, names)

    def name_late(self, state: ThreadState, names: dict[int, str]) -> None:
        """Give the nodes written as `?` their late names (late_names)."""
        keys, unnamed = self._seq_keys[state.row], self._unnamed
        facts_of, bumps = self.raw.nodes, self.raw.bumps
        for seq, name in names.items():
            key = keys.get(seq)
            if key is None or key not in unnamed:
                continue
            unnamed.discard(key)
            facts = facts_of.get(key)
            if facts is not None:
                facts_of[key] = facts._replace(name=name)
            bump = bumps.get(key)
            if bump is not None:
                bumps[key] = bump._replace(name=name)

    def renumbered(self, state: ThreadState, old: int, new: int) -> None:
        """`_set_sequence_nr` gave the node numbered `old` the number `new` (NOTE [renumbered nodes] in
        renumbered.py): the node keeps its key, line and events, and carries `new` from now on, as torch's hooks and
        walks read it."""
        self.write_seen(state)
        if state.calls:  # a renumbering inside a backward call: its walk already keyed the node
            return
        if state.log:  # its increment waits in the log: keyed now, as a replay after each call would have keyed it
            self.key_up_to(state, state.last)  # (NOTE [keys before the replay]), and known by both numbers until
            keys = self._seq_keys[state.row]  # the replay has written it
            key = keys.get(old)
            if key is not None and keys.get(new) is None:
                keys[new] = key
                state.log.append((RENUMBER, old, new, state))  # its thread: NOTE [pool thread] in state.py
            return
        self.move_key(state, old, new)

    def move_key(self, state: ThreadState, old: int, new: int) -> None:
        """The node numbered `old` carries `new` from now on (renumbered), unless another node holds `new`."""
        keys = self._seq_keys[state.row]
        key = keys.get(old)
        if key is None or keys.get(new, key) != key:  # another node holds `new` already: the walk tells the two apart
            return
        keys.pop(old)
        keys[new] = key
        raw = self.raw
        facts = raw.nodes.get(key)
        if facts is not None:
            raw.node_facts[key] = facts._replace(seq_nr=new)
        bump = raw.bumps.get(key)
        if bump is not None:
            raw.bumps[key] = bump._replace(seq_nr=new)

    def log(self, seq: int, name: str, frame: int) -> None:
        """One `agdb.seq_nr` line for an increment as it is written, in the engine's form (recording/culprits.py)."""
        if frame >= 0:
            filename, lineno, function, source, col, end_col, *module = self.b._frame_rows[frame]
        else:
            filename, lineno, function, source, col, end_col, module = "", 0, "?", "", -1, -1, []
        if source is None:
            source = source_line(filename, lineno) if filename else ""
        culprits.logger.info(culprits.Culprit(seq, seq + 1, name, 0, filename, lineno, function, source, -1, col,
                                              end_col, module[0] if module else "").line())

    # -- lines -----------------------------------------------------------------------------------------------------
    def frame_row(self, code: Any, lasti: int, lineno: int, module: str = "") -> int:
        """The frame row of line `lineno` of `code` whose bytecode at offset `lasti` ran, with that bytecode's columns
        (the engine's rule: tracer.recording.frames.columns; `lasti` -1: the line without columns), in the module
        call `module` (NOTE [module paths])."""
        key = (id(code), lasti, lineno, module)  # NOTE [code keys] in line_table.py
        row = self._frames.get(key)
        if row is None:
            col, end_col = columns_at(code, lasti, lineno) if lasti >= 0 else (-1, -1)
            row = self._frames[key] = self.b.frame(code.co_filename, lineno, code.co_name, col=col, end_col=end_col,
                                                   module=module)
            self._codes.append(code)
        return row

    def in_module(self, row: int, module: str) -> int:
        """Frame row `row` in the module call `module` (the line tracer learns the module after the row)."""
        if row < 0 or not module:
            return row
        found = self._module_rows.get((row, module))
        if found is None:
            filename, lineno, function, source, col, end_col = self.b._frame_rows[row][:6]
            found = self._module_rows[(row, module)] = self.b.frame(filename, lineno, function, source, col=col,
                                                                    end_col=end_col, module=module)
        return found

    def user_frame(self, module: str = "") -> int:
        """The frame row of the innermost line outside torch and agdb (for `1 - x`, torch/overrides.py calls)."""
        f = sys._getframe(2)
        skip = self._skip
        while f is not None:
            code = f.f_code
            inside = skip.get(id(code))
            if inside is None:
                inside = skip[id(code)] = is_library(code.co_filename)
                self._codes.append(code)
            if not inside:
                return self.frame_row(code, f.f_lasti, f.f_lineno, module)
            f = f.f_back
        return -1

    # -- writing increments ----------------------------------------------------------------------------------------
    def bump(self, row: int, seq: int, name: str, frame: int, created: bool = True) -> int:
        """Write one increment; a node a walk already met keeps its key (and its name, if ours is a guess). Without
        `created`, the node's facts are kept but no NodeCreated is written (a node that joins no graph). A number
        a Dynamo compile took is written as no node (NOTE [numbers taken while compiling] in compiling.py)."""
        if name == "?" and self._compile_seqs:
            ranges = self._compile_seqs.get(row)
            if ranges is not None and is_compile_time(ranges, seq):
                return 0
        keys = self._seq_keys[row]
        key = keys.get(seq)
        if key is None:
            key = keys[seq] = next(self._keys)
        else:
            facts = self.raw.nodes.get(key)
            if facts is not None and name.startswith("?"):
                name = facts.name
        if name.startswith("?"):
            self._unnamed.add(key)
        if self.log_culprits:
            self.log(seq, name, frame)
        # NOTE [builder fast path]: one increment per forward op, so its two events are appended the way
        # TraceBuilder.seq_nr_bumped and node_created append them (as the engine's Recorder does).
        raw = self.raw
        rows = raw.rows
        raw.bumps[key] = _new(Bump, (name, seq, frame))
        rows.extend((_K_BUMP, row, 0, key, 0, 0, 0))  # flat: ROW ints a row (NOTE [frozen chunks])
        if key not in raw.nodes:  # its edges come when a walk meets it (Walker.describe)
            raw.node_facts[key] = _new(NodeFacts, (name, seq, 0, "cpu", row, (), frame, self.b.num_events, 1))
            if created:
                rows.extend((_K_CREATED, row, 0, key, 0, 0, 0))
            if len(rows) >= CHUNK * ROW:
                self.b.freeze_rows()
        return key

    def bumps(self, state: ThreadState, start: int, after: int, names: Any, frame: int, created: bool = True) -> None:
        """Increments start..after-1 on `frame`, named by `names` (a list, or one name for the first); `created`: as
        `bump`'s."""
        if state.seen:
            self.write_seen(state)
        if state.log or state.calls:  # keep the order of a pending log (NOTE [observe now, reconstruct later])
            state.log.append((BUMP, start, after, names, frame, created, state))  # its thread: NOTE [pool thread]
            return
        self.emit_bumps(state, start, after, names, frame, created)

    def emit_bumps(self, state: ThreadState, start: int, after: int, names: Any, frame: int,
                   created: bool = True) -> None:
        """Write increments start..after-1 now (after the gap before them), named as `bumps` names them."""
        self.gap(state, start, frame)
        for s in range(start, after):
            self.bump(state.row, s, names[s - start] if isinstance(names, list) else names, frame, created)
            if not isinstance(names, list):
                names = "?"
        state.rlast = max(state.rlast, after)

    def key_up_to(self, state: ThreadState, now: int) -> None:
        """Give every number below `now` a node key now, as the replay would (NOTE [keys before the replay]).

        NOTE [keys before the replay]
        A node's key is given by whichever comes first: a walk that meets it, or the replay that writes its
        increment (forward.bump). The trace numbers its nodes in the order of their keys, so a replay put off to
        the recording's end (NOTE [observe now, reconstruct later] in bridge.py) would let the next backward's walk
        key the forward's new nodes first, in the walk's order, and the same nodes would be numbered otherwise than
        by a replay after each call. So, while a log waits, the numbers it accounts for are keyed before anything
        else could key them, in ascending order, as that replay keys them (its increments and gaps come in the
        counter's order): up to the counter when an outermost call returns, and up to the last number the forward's
        observers saw (`state.last`) when an outermost call begins, before its walk (Backward.run). On one thread
        nothing else takes a key in between, so the numbering is the same; the replay then finds every key made.
        """
        keys = self._seq_keys[state.row]
        start = state.keyed if state.log else max(state.keyed, state.rlast)
        if start < now:
            counter, get = self._keys, keys.get
            for s in range(start, now):
                if get(s) is None:
                    keys[s] = next(counter)
            state.keyed = now

    def gap(self, state: ThreadState, now: int, frame: int) -> None:
        """Increments nobody saw (nodes C++ made during a backward, ...): unnamed until a walk meets them."""
        for s in range(state.rlast, now):
            self.bump(state.row, s, "?", frame)
        if now > state.rlast:
            state.rlast = now
