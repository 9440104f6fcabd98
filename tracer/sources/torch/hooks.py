"""The bridge's pre- and post-hook on each node a walk meets: they only log what they see (NOTE [observe now,
reconstruct later] in bridge.py), and are registered the lean way during a walk (NOTE [lean registration]).

Imports torch (through bridge.py only); never textual or rich.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

from agdb.tracer.sources.torch.state import POST, PRE, BridgeState, ThreadState

_seq = torch.autograd._get_sequence_nr
_gt_id = torch._C._current_graph_task_id  # -1 outside a backward
_running = torch._C._current_autograd_node
_PY_NODE = torch.autograd.function.BackwardCFunction  # the node of a custom Function: its backward is Python
_mode_depth = torch._C._len_torch_function_stack
_push_mode = torch._C._push_on_torch_function_stack
_pop_mode = torch._C._pop_torch_function_stack
_weakref = weakref.ref


class _LeanRegistration(threading.local):
    """NOTE [lean registration]
    Registering a hook on a node calls torch's `_HookMixin._register_hook`, which makes a RemovableHandle (a
    Python object, a weak reference and a class counter): a third of what walking and hooking a new graph cost.
    While the bridge walks on this thread, the bridge's version stores the hook in the node's hook dict under
    a key no RemovableHandle takes (HOOK_KEY) and hands back the dict itself (None if the dict holds a hook of ours
    for the same log: the node is hooked already), which the bridge removes its hook from by that key. Any other
    thread, and this one outside a walk, gets torch's own.
    The dict it makes is a HookDict, not torch's OrderedDict: a node's one hook dict (one for its pre-hooks, one
    for its post-hooks) costs a deep graph memory per node, and a plain dict with room for a weak reference is
    less than half an OrderedDict. torch only iterates the dict, and adds a later hook to it like to its own.
    """

    thread: int | None = None


class HookDict(dict):
    """A node's hook dict made during a walk (NOTE [lean registration]): a dict the bridge can refer to weakly.
    A pre-hook dict of ours also holds the node's post-hook dict (`post`), so that one weak reference to the
    first finds both (a dict holds no node: the node holds both dicts, and neither outlives it)."""

    __slots__ = ("__weakref__", "post")


LEAN = _LeanRegistration()
"""`LEAN.thread`: the ident of the thread whose walk is in progress (walk.py sets it), else None."""
HOOK_KEY = "agdb"
"""The bridge's key in a node's hook dict: torch's RemovableHandles take ints, and a dict whose keys are all str has
a smaller table (a deep graph has two such dicts per node)."""
_ORIGINAL_REGISTER = torch.autograd.function._HookMixin.__dict__["_register_hook"]


def register_hook(backward_hooks: Any, hook: Any) -> tuple:
    """`_HookMixin._register_hook` while recording: torch's own, but lean during a walk (NOTE [lean registration])."""
    if LEAN.thread is None:
        return _ORIGINAL_REGISTER.__func__(backward_hooks, hook)
    if backward_hooks is None:
        backward_hooks = HookDict()
    else:
        old = backward_hooks.get(HOOK_KEY)
        if old is not None and getattr(old, "log", None) is hook.log:
            return backward_hooks, None  # the node has ours, for this thread's log already (Hooks.hook)
    backward_hooks[HOOK_KEY] = hook
    return backward_hooks, backward_hooks


class NodeHook:
    """The bridge's pre- and post-hook of a C++ node, in one small object: it logs what it sees (NOTE [observe now,
    reconstruct later] in bridge.py). torch calls a pre-hook with the node's grad_outputs and a post-hook with its
    grad_inputs and grad_outputs (a tuple, never None), so the count of arguments tells which it is. One object
    with two slots, rather than two closures and their cells, keeps a deep graph's hooks small: a million-node
    chain carries a million of them."""

    __slots__ = ("log", "key")

    def __init__(self, log: list, key: int) -> None:
        self.log = log  # the hooked thread's log list itself (a backward on the CPU runs on its caller's thread)
        self.key = key

    def __call__(self, grads: tuple, grad_outputs: tuple | None = None) -> None:
        if grad_outputs is None:  # the pre-hook: what torch says is running is checked at the replay
            self.log.append((PRE, self.key, grads, _seq(), _gt_id(), _running()._sequence_nr()))
        else:
            log = self.log
            log.append((POST, self.key, grads, grad_outputs))
            if len(log) > log.limit:  # NOTE [replay in parts] in reconstruct.py
                log.replay_part()


class ShapesHook(NodeHook):
    """A NodeHook for `values=False`: it keeps no grad alive, only which of the node's outputs were defined."""

    __slots__ = ()

    def __call__(self, grads: tuple, grad_outputs: tuple | None = None) -> None:
        if grad_outputs is None:
            self.log.append((PRE, self.key, (), _seq(), _gt_id(), _running()._sequence_nr()))
        else:
            log = self.log
            log.append((POST, self.key, (grads[0] is not None,) if len(grads) == 1 else
                        tuple([g is not None for g in grads]), ()))
            if len(log) > log.limit:  # NOTE [replay in parts] in reconstruct.py
                log.replay_part()


class Hooks:
    """Puts the bridge's hooks on nodes and takes them off.

    NOTE [hooked nodes]
    A walk notes each node it hooked as two items of its list `hooked`: the node's key and its pre-hook dict itself
    (strongly: a dict holds no node, and the call that frees the graph unhooks it when it returns, then lets the
    list go). Only the nodes of a retained graph, whose hooks stay until the recording ends, are kept by key in
    `shared.handles`, weakly (`keep`); an AccumulateGrad's pre-hook dict, weakly in `shared.acc_alive`, tells
    whether that node still lives (NOTE [node identity] in walk.py). A million-node graph freed by its backward
    thus costs its walk one list, rather than a weak reference and a dict entry per node.
    """

    def __init__(self, shared: BridgeState) -> None:
        self.values = shared.values
        self._handles = shared.handles
        self._is_acc = shared.is_acc
        self._acc_alive = shared.acc_alive
        self._foreign: dict[int, Any] = {}  # key -> weakref to its post-hook dict, when its pre-hook dict is not ours

    def hook(self, n: Any, key: int, state: ThreadState, hooked: list, mode: Any) -> None:
        """Hook node `n` (`key`) for this thread's log, unless it has ours already; note it in `hooked` (NOTE [hooked
        nodes]). `mode` is what a custom Function's backward runs with (culprits seen in it), or None."""
        # A node hooked for another thread's backward logs to this thread's log from now on (registering again
        # replaces our hook in its dicts). The hooks append to this thread's log list itself: a backward on the CPU
        # runs on the thread that called it, and a lookup per call (threading.local) would cost as much as the hook.
        # A pre-hook logs torch's graph task id and the seq_nr of the node torch says is running
        # (`_current_autograd_node()`), checked against the hook's own node and call when the log is replayed.
        log, values = state.log, self.values
        if not isinstance(n, _PY_NODE):  # a C++ node runs no Python of its own: log and return
            pre = post = (NodeHook if values else ShapesHook)(log, key)
        else:  # a custom Function's node (with values=False too: its increments need the mode as much)
            pre, post = _function_hooks(log, key, values, state, mode)

        # NOTE [lean registration]: during a walk, registering returns the node's hook dict itself. The bridge
        # refers weakly to the pre-hook dict only, which holds the post-hook dict when it is ours (HookDict); a
        # dict torch made for an earlier hook of the program's cannot, and `_foreign` refers to its partner.
        pre_dict = n.register_prehook(pre)
        if pre_dict is None:
            return  # this node has ours already: once per graph, not once per backward
        post_dict = n.register_hook(post)
        if type(pre_dict) is HookDict:
            pre_dict.post = post_dict
        elif isinstance(post_dict, dict):
            self._foreign[key] = _weakref(post_dict)
        else:  # torch's RemovableHandle: the recording ended during this walk, and torch's registration is back
            self._foreign[key] = lambda handle=post_dict: handle
        hooked += key, pre_dict
        if key in self._is_acc:
            self._acc_alive[key] = _weakref(pre_dict)

    def keep(self, hooked: list) -> None:
        """The nodes a walk hooked belong to a retained graph: their hooks stay until the recording ends (NOTE
        [hooked nodes])."""
        handles = self._handles
        for i in range(0, len(hooked), 2):
            handles[hooked[i]] = _weakref(hooked[i + 1])

    def unhook(self, hooked: list) -> None:
        """Take the bridge's hooks off the nodes a walk hooked (`hooked`: NOTE [hooked nodes])."""
        handles = self._handles
        for i in range(0, len(hooked), 2):
            key = hooked[i]
            handles.pop(key, None)
            self._unhook(key, hooked[i + 1])

    def unhook_all(self) -> None:
        """Take every hook of the bridge off its node."""
        for key, ref in self._handles.items():
            self._unhook(key, ref())
        self._handles.clear()
        self._foreign.clear()

    def _unhook(self, key: int, pre_dict: Any) -> None:
        """Take the bridge's hooks out of node `key`'s hook dicts, if the node still lives (`pre_dict` is not None)."""
        post_ref = self._foreign.pop(key, None)
        if pre_dict is None:
            return
        if not isinstance(pre_dict, dict):  # RemovableHandles (hook): each takes its own hook off
            pre_dict.remove()
            post_ref().remove()
            return
        pre_dict.pop(HOOK_KEY, None)
        if type(pre_dict) is HookDict:
            post_dict, pre_dict.post = pre_dict.post, None  # a later hooking sets it again
        else:
            post_dict = post_ref() if post_ref is not None else None
        if post_dict is not None:
            post_dict.pop(HOOK_KEY, None)


def _function_hooks(log: list, key: int, values: bool, state: ThreadState, mode: Any) -> tuple[Any, Any]:
    """The pre- and post-hook of a custom Function's node (a closure each: such nodes are few, and the pre-hook
    puts the mode back for the Function's Python backward)."""
    def pre(grad_outputs):
        log.append((PRE, key, grad_outputs if values else (), _seq(), _gt_id(), _running()._sequence_nr()))
        if not _mode_depth() and mode is not None:
            # The engine runs nodes with no torch-function mode: put ours back for a custom Function's
            # backward (its ops, a reentrant backward) so its increments get their lines. The engine
            # restores the thread's state after each node, so a node that fails cannot leave it behind.
            _push_mode(mode)
            state.pushed.append(key)

    def post(grad_inputs, grad_outputs):
        if state.pushed and state.pushed[-1] == key:
            state.pushed.pop()
            if _mode_depth():
                _pop_mode()
        if values:
            log.append((POST, key, grad_inputs, grad_outputs))
        else:
            log.append((POST, key, tuple([g is not None for g in grad_inputs]), ()))

    pre.log = log  # which thread's log it writes to, as a NodeHook's `log` says (Hooks.hook)
    return pre, post
