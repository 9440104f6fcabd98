"""seq_nr culprits by line: the bridge's default way of seeing the forward (NOTE [line culprits]).

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import dis
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable

import torch

from agdb.tracer.recording.async_exc import lower_flag
from agdb.tracer.sources.torch.line_names import moved
from agdb.tracer.sources.torch.line_table import NO_LINES, CodeLines
from agdb.tracer.sources.torch.renumbered import Renumbered

_seq = torch.autograd._get_sequence_nr
_TENSOR = torch.Tensor
_CO_OPTIMIZED = 0x1  # inspect.CO_OPTIMIZED: a function's frame, whose f_locals is a snapshot (NOTE [stale locals])
_GENERATOR = 0x20 | 0x80 | 0x200  # inspect.CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR: frames that yield
_YIELD_VALUE = dis.opmap["YIELD_VALUE"]


class LineCulprits:
    """NOTE [line culprits]
    A TorchFunctionMode that does nothing already costs 1.7-2x a small op's time, so the bridge reads the
    counter at every line of the user's code instead (`sys.settrace` on the recording thread, and on each thread
    started while recording: NOTE [threads' line tracers] in threads.py; frames of torch,
    agdb and Python's own library get no line events): an increment seen at an event belongs to the line that
    ran before it (a line event, a call into or a return from a user function). The
    trace function is the only work done per line, so its fast path is a counter read and a compare.

    Naming without the op's outputs: when the counter moved, the nodes are named from the tensors the line
    stored or read (the names of its STORE_* and LOAD_* instructions, from the bytecode once per code object:
    a tensor an in-place op changed is one it read), a returning frame's value, or a
    called function's arguments, walking their grad_fn and the nodes they reach within the new range (and
    within the last WINDOW numbers, for nodes a line made and dropped into a list that a later line reads). A
    view is never asked for its grad_fn (a stale one would make a node by being looked at); its base is. The
    node an in-place op on a view hides inside CopySlices is named after the line's one in-place method call.
    What no line names (a result nobody kept) stays `?` until a backward's walk meets the node.

    Views are the exception: asking a stale view for its grad_fn makes a node (and takes a number), and from
    Python nothing tells a stale view from a fresh one. So a line that may make or change a view (it indexes,
    assigns into or deletes from a subscript, calls a method or function whose name is a view op, an in-place
    method `x.op_()`, or an augmented assignment `x += y`; read from the bytecode) runs with the bridge's
    TorchFunctionMode pushed, which names each op's nodes from its outputs (Forward.op_bumped), from the line's
    first event until the next event of the frame that pushed it, and taken off while a user function the line
    calls runs (its own lines decide). Only such lines pay the mode's cost.

    A backward call runs with no trace function (Patches._wrap_run_backward): its hooks are Python calls, and
    each would cost a call event. As in the mode's way, a custom Function's backward runs with the mode pushed
    (Hooks.hook), and what the engine makes in C++ (create_graph) falls to the bridge's gap rule (Forward.gap).
    """

    def __init__(self, forward: Any, mode: Any, state: Any, is_library: Callable[[str], bool]) -> None:
        self.stopped = [False]  # the recording ended: every thread's tracer takes itself off (threads.py)
        # NOTE [stale locals]: function frames whose locals agdb read (see `touch`); a frame hashes by identity.
        self._touched: dict[Any, Any] = {}
        self.forward = forward  # forward.py's Forward: where the increments are written
        self.mode = mode  # the bridge's TorchFunctionMode, pushed for the lines that may make a view
        self.state = state
        self.thread = threading.get_ident()
        self._code_lines = CodeLines(forward.frame_row)  # each code's tables and lines (NOTE [per-code tracers])
        self._user: dict[str, bool] = {}  # co_filename -> whether it is the user's (a str caches its hash)
        self._is_library = is_library
        self._type_names: dict[type, str] = forward.type_names
        self._pending: OrderedDict[int, int] = OrderedDict()  # seq_nrs left `?` (oldest first), within WINDOW
        self._traced: list = []  # frames given our trace function at attach
        self._marks: list = []  # (first, after, offset): numbers an opcode-traced line's instruction took
        self._timeline: Any = ()  # the module calls' timeline (ModuleCalls.timeline), or () when not followed
        self._write_now = False
        self._renumbering: list = []  # (frame, [(node, its seq_nr)]) of lines that call _set_sequence_nr, running
        self.renumbered = Renumbered(self, self._renumbering)
        self._previous: Any = None
        self.flush: Callable[[tuple], None] = lambda candidates=(): None
        self._unpush: Callable[[], None] = lambda: None

    # -- attaching ------------------------------------------------------------------------------------------------
    def for_thread(self, state: Any) -> LineCulprits:
        """The tracer of another thread (NOTE [threads' line tracers] in threads.py): its own counter, state and
        pending numbers; this one's caches, frames to refresh and stop flag."""
        other = LineCulprits(self.forward, self.mode, state, self._is_library)
        for name in _SHARED:
            setattr(other, name, getattr(self, name))
        return other

    def start(self, frame: Any, event: str, arg: Any) -> Any:
        """Become this thread's trace function at its first call (`frame`), as threading's hook."""
        self._follow()
        trace, _tracer_of, self.flush = self._tracers(None)
        sys.settrace(trace)
        return trace(frame, event, arg)

    def _follow(self) -> None:
        """What the tracers read from the Forward when they begin: whether agdb.seq_nr logs each increment as it is
        seen, and the module calls' timeline, when followed (NOTE [module paths])."""
        self._write_now = self.forward.log_culprits
        calls = self.forward.calls
        self._timeline = calls.timeline if calls is not None and calls.timed else ()

    def attach(self) -> None:
        self._previous = sys.gettrace()  # None: the bridge takes this way only then
        self._follow()
        trace, tracer_of, flush = self._tracers(self._innermost_user(sys._getframe(1)))
        self.flush = flush
        lower_flag()  # left up, this thread would spin at its next call (NOTE [the async-exception flag])
        sys.settrace(trace)
        f = sys._getframe(1)
        while f is not None:  # frames already running get line events from now on
            if self._is_user(f.f_code):
                f.f_trace = tracer_of(f.f_code)
                self._traced.append(f)
            f = f.f_back

    def detach(self) -> None:
        self._unpush()
        self.flush(())
        sys.settrace(self._previous)
        for f in self._traced:
            f.f_trace = None
        self._touched.clear()  # frames still running keep their snapshots as they are now (NOTE [stale locals])
        self._unpush = lambda: None
        self._traced.clear()
        self._pending.clear()
        self.flush = lambda candidates=(): None

    def touch(self, frames: Any) -> None:
        """NOTE [stale locals]
        Reading a function frame's `f_locals` makes CPython (3.11) snapshot its locals into a dict the frame keeps.
        A trace call refreshes that dict only right after someone read it, so from the frame's next event on the
        snapshot goes stale: a tensor the program has since deleted or rebound stays alive in it, and with it its
        whole graph (a training loop's previous step, which makes torch hand the next step the same
        AccumulateGrad: the recording would change the program). So every frame whose locals agdb read (naming
        nodes at a line, or a backward call's look-up of modules and leaves) is refreshed at each of its events
        while recorded (a refresh is what the trace call itself does when someone read the locals). It is never
        emptied: inside a trace call the call would write the empty dict back and unbind every local, and
        anywhere it is the very dict the program's own `locals()` returns. Frames that get no events are left
        out: those a backward call runs (tracing is off there) end with it, snapshot and all. What stays: a
        frame still running when the recording ends keeps the snapshot it has then (as after a `locals()` call),
        and so does one read under culprits="mode" or on another thread."""
        touched = self._touched
        for f in frames:
            if f.f_code.co_flags & _CO_OPTIMIZED and f.f_trace is not None:
                touched[f] = f

    def _is_user(self, code: Any) -> bool:
        user = self._user.get(code.co_filename)
        if user is None:
            user = self._user[code.co_filename] = not self._is_library(code.co_filename)
        return user

    # -- the trace functions -----------------------------------------------------------------------------------
    def _tracers(self, at: Any) -> tuple:
        """NOTE [per-code tracers]
        Every line of the user's code costs a trace call, so what one does is measured in instructions: a frame's
        `f_code` is an audited attribute (a `sys.audit` call each time), and `id()` makes an int. So the local trace
        function is made once per code object (`tracer_of`) with that code's tables in its closure, and `where`
        carries the lines of the code it points into (CodeLines.lines_of: offset -> facts, and whether the frames'
        locals are a snapshot) beside the frame and offset: naming a node reads neither `f_code` nor a key built from
        it.
        Frames are kept in `_touched` by themselves (a frame hashes by identity), not by id."""
        state, seq, user, is_user, moved = self.state, _seq, self._user, self._is_user, self._moved
        touched, code_lines = self._touched, self._code_lines
        table, lines_of, known_lines = code_lines.table, code_lines.lines_of, code_lines.by_code
        marks, mode, stopped = self._marks, self.mode, self.stopped
        opmark = [0]  # the counter at the last opcode event (NOTE [columns on lines])
        renumbering, renumber_check = self._renumbering, self.renumbered.check
        # the user frame running now, its bytecode offset (the line an increment is on), and its code's lines
        where: list = [at, at.f_lasti if at is not None else -1, lines_of(at.f_code) if at is not None else NO_LINES]
        pushed: list = [None]  # the frame that pushed the mode for its line (NOTE [line culprits]: views)
        suspended: list = []  # frames whose mode is off while a user function they called runs
        pending, timeline, type_names = self._pending, self._timeline, self._type_names
        write_now, bump_one = self._write_now, self.forward.bump_one
        tracers: dict[int, Callable] = {}  # id(code) -> its frames' local trace function (NOTE [per-code tracers])

        def returned(frame):
            if touched:  # the frame ends, and its snapshot with it; a generator's yield is no end
                code = frame.f_code
                if not (code.co_flags & _GENERATOR and code.co_code[frame.f_lasti] == _YIELD_VALUE):
                    touched.pop(frame, None)
            f = frame.f_back
            while f is not None:
                u = user.get(f.f_code.co_filename)
                if u is None:
                    u = is_user(f.f_code)
                if u:
                    break
                f = f.f_back
            where[0] = f
            if f is None:
                where[1], where[2] = -1, NO_LINES
            else:
                where[1] = f.f_lasti
                lines = known_lines.get(id(f.f_code))
                where[2] = lines if lines is not None else lines_of(f.f_code)
            if suspended and suspended[-1] is f:  # back in a line that runs with the mode
                _push(mode)
                pushed[0] = suspended.pop()

        def make_tracer(lines, table):
            """The local trace function of a code's frames: its lines (`lines_of`), and the offsets of its line events
            that push the mode or trace opcodes (NOTE [line culprits]: views, NOTE [columns on lines])."""
            special, opcode_lines, mode_lines = table.special_offsets, table.opcode_offsets, table.mode_offsets
            last_culprits, renumber_lines = table.last_culprits, table.renumber_offsets

            def local(frame, event, arg):
                if event == "opcode":  # NOTE [columns on lines]: numbers taken since the last opcode are its
                    now = seq()          # instruction's; they are written with the line's names when the line ends
                    if now != opmark[0]:
                        marks.append((opmark[0], now, where[1]))
                        opmark[0] = now
                    where[0] = frame
                    lasti = where[1] = frame.f_lasti
                    where[2] = lines
                    if lasti in last_culprits:  # no culprit after it on its line: the next event sees what it took
                        frame.f_trace_opcodes = False
                    return local
                if pushed[0] is frame and event != "exception":
                    pushed[0] = None
                    _pop(mode)
                    if renumbering:
                        renumber_check(frame)
                now = seq()
                start = state.last
                if now != start:
                    # NOTE [one number, one name]: `_moved`'s commonest case, inline: the counter moved by one on a
                    # known line, outside every module call (NOTE [module paths]), with no opcode marks or pending
                    # numbers to account for, and a name the line stores or reads holds the tensor whose grad_fn took
                    # it; anything else goes to `_moved`.
                    at, lasti, at_lines = where
                    got = at_lines[0].get(lasti) if now == start + 1 else None
                    g = None
                    if got is not None and got[1] and not (marks or pending or stopped[0] or state.row < 0) and (
                            not timeline or timeline[-1][0] <= start and timeline[-1][1] is None):
                        if timeline:  # no module call running since before `start`: the changes before are done with
                            del timeline[:-1]
                        scope = at.f_locals
                        if at_lines[1] and at.f_trace is not None:
                            touched[at] = at  # NOTE [stale locals]
                        for name in got[1]:
                            v = scope.get(name)
                            if type(v) is _TENSOR and v._base is None:
                                g = v.grad_fn
                                if g is not None and g._sequence_nr() == start:
                                    break
                        else:
                            g = None
                        v = scope = None
                    if g is not None:
                        node_name = type_names.get(type(g))
                        if node_name is None:
                            node_name = type_names[type(g)] = g.name()
                        g = None
                        state.last = now
                        if state.calls or state.log or write_now:  # logged: written at once
                            bump_one(state, start, node_name, got[0])
                        else:  # noted now, written before anything else is (Forward.write_seen)
                            state.seen.append((start, node_name, got[0]))
                    else:
                        moved(at, lasti, event, frame, arg)
                elif touched and frame in touched:
                    frame.f_locals  # noqa: B018 - a refresh (NOTE [stale locals])
                if event == "line":
                    where[0] = frame
                    lasti = where[1] = frame.f_lasti
                    where[2] = lines
                    if lasti in special:
                        if lasti in opcode_lines:
                            frame.f_trace_opcodes = True
                            opmark[0] = state.last
                        if pushed[0] is None and lasti in mode_lines:
                            _push(mode)
                            pushed[0] = frame
                            if lasti in renumber_lines:
                                renumbering.append((frame, self.renumbered.numbered(frame, lasti)))
                elif event == "return":
                    returned(frame)
                elif event == "exception" and arg[0] is GeneratorExit:  # closed at a yield: its end, not a yield
                    touched.pop(frame, None)
                return local

            return local

        def tracer_of(code):
            """The local trace function of `code`'s frames, made once per code (NOTE [per-code tracers])."""
            local = tracers.get(id(code))
            if local is None:
                local = tracers[id(code)] = make_tracer(lines_of(code), table(code))
            return local

        def trace(frame, event, arg):  # "call" events only: say which frames get line events
            code = frame.f_code
            u = user.get(code.co_filename)
            if u is None:
                u = is_user(code)
            if not u:
                return None
            if stopped[0]:  # a thread still running when the recording ended (NOTE [threads' line tracers])
                unpush()
                sys.settrace(None)
                return None
            if seq() != state.last:
                moved(where[0], where[1], "call", frame, arg)
            if pushed[0] is not None and _compile_context() is None:  # the callee's own lines say whether they
                _pop(mode)                                                 # need the mode (NOTE [compile time]:
                suspended.append(pushed[0])                                # not while Dynamo compiles, which checks
                pushed[0] = None                                           # that the mode stack stays as it was)
            local = tracers.get(id(code))
            if local is None:
                local = tracer_of(code)
            where[0] = frame
            where[1] = frame.f_lasti
            where[2] = known_lines[id(code)]
            return local

        def flush(candidates: tuple = ()) -> None:
            if threading.get_ident() == self.thread and seq() != state.last and not state.calls:
                moved(where[0], where[1], "flush", None, candidates)

        def unpush() -> None:
            suspended.clear()
            renumbering.clear()
            if pushed[0] is not None:
                pushed[0] = None
                _pop(mode)

        self._unpush = unpush
        return trace, tracer_of, flush

    def _innermost_user(self, f: Any) -> Any:
        while f is not None and not self._is_user(f.f_code):
            f = f.f_back
        return f

    _moved = moved  # the counter moved since the last event (line_names.py): the general path

    # -- lines ---------------------------------------------------------------------------------------------------
    def _line(self, code: Any, lasti: int) -> tuple:
        """(frame row, names the line stores or reads, the hidden node's name for its in-place call or "") of the line
        that holds bytecode offset `lasti` (CodeLines.line)."""
        return self._code_lines.line(code, lasti)


_SHARED = ("stopped", "_touched", "_code_lines", "_user", "_type_names")
"""What every thread's LineCulprits shares with the recording thread's (caches whose entries any thread may add)."""
_push = torch._C._push_on_torch_function_stack
_compile_context = torch._guards.TracingContext.try_get


def _pop(mode: Any) -> None:
    """Take the mode off if it is on top (a mode the user pushed on the same line stays, and so does ours)."""
    depth = torch._C._len_torch_function_stack()
    if depth and torch._C._get_function_stack_at(depth - 1) is mode:
        torch._C._pop_torch_function_stack()

