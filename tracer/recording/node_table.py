"""NodeTable: a builder's node facts by key, in a dict or packed in columns (NOTE [packed node facts]).

Never imports the engine, textual or rich.

NOTE [packed node facts]
A NodeFacts tuple a node, in a dict by key, costs ~120 B for the tuple, ~40 for the dict's slot and ~30 for each int
of its own (the key, the seq_nr, the step, the topological_nr), and a node with one next edge a pair (56 B): ~300 B
a node, which a million-node graph recorded from real PyTorch pays on top of everything else. So a builder made
with `pack_nodes` moves the facts into columns by key (~65 B a node; one next edge as two ints, not a pair) each time
it freezes rows (NOTE [frozen chunks] in builder.py). Writers still put a whole
NodeFacts in `recent`, a plain dict (NOTE [builder fast path]); a node's facts in `recent` win over its packed ones,
so a writer never needs to know where they are. Readers ask the table (`get`, `in`), never `recent` alone. Facts
that do not fit the columns (a key far past their end, a seq_nr below 0, a thread row past 32 bits, ...) stay in
`recent`. `pack` never loses a write made meanwhile on another thread: it pops each fact it packed and puts back
whatever it popped that is not what it packed.
"""
from __future__ import annotations

import threading
from itertools import chain, compress
from operator import is_not
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

_new = tuple.__new__


class NodeFacts(NamedTuple):
    """What a trace knows of one node, by its key: `RawBuffers.node_facts` holds one per node. A source on the fast
    path makes one with `tuple.__new__(NodeFacts, (...))`, a third of the cost of calling the class."""

    name: str
    seq_nr: int
    topological_nr: int
    device: str
    thread: int  # thread row, or -1
    next_edges: tuple[int, ...]  # flat: child key or 0, input_nr, child key or 0, input_nr, ...
    frame: int  # frame row of the line that made it, or -1
    step: int  # the step of its creation (the number of events before it)
    num_inputs: int  # input slots


FIELDS = NodeFacts._fields
_INTS = {"seq_nr": np.uint64, "topological_nr": np.int64, "thread": np.int32, "frame": np.int32,
         "step": np.int64, "num_inputs": np.int32}
"""The int columns and their dtypes; `name` and `device` are ids into the table's texts. `next_edges` is three
columns: `edge_child` and `edge_nr` for one edge (child key or 0, input_nr), else `next_edges`, the flat tuple
(`edge_child` is -1 there, and `next_edges` None where the ints hold the edge)."""
_DTYPES = {**_INTS, "name": np.int32, "device": np.int32, "next_edges": object, "edge_child": np.int64,
           "edge_nr": np.int32}
_TEXTS = ("name", "device")
_INDEX = {name: i for i, name in enumerate(FIELDS)}


class Packed(NamedTuple):
    """A NodeTable copied at one moment (`NodeTable.snapshot`): the packed facts, in ascending key order, and the
    facts of `recent`, which win over the packed ones of the same key."""

    keys: np.ndarray  # int64, ascending
    columns: dict[str, np.ndarray]  # column -> one value per key (texts as str objects; next_edges as _DTYPES says)
    recent: dict


class NodeTable:
    """Node key -> NodeFacts (NOTE [packed node facts]): a mapping for readers (`get`, `in`, `keys`), `recent` for
    writers, `pack` to move `recent` into the columns, `write` to change fields of many nodes at once."""

    REACH = 1 << 16
    """How far past the columns' end a key may fall and still be packed (they grow to take it)."""

    def __init__(self) -> None:
        self.recent: dict[int, NodeFacts] = {}
        self.present = bytearray()  # by key: 1 where the columns hold that key's facts (grown in place, never rebound)
        self._columns: dict[str, np.ndarray] = {name: np.zeros(0, dtype=dtype) for name, dtype in _DTYPES.items()}
        self._texts: list[str] = []
        self._text_ids: dict[str, int] = {}
        self._lock = threading.Lock()  # one packer or writer of the columns at a time

    # -- reading ------------------------------------------------------------------------------------------------------
    def get(self, key: int, default: Any = None) -> NodeFacts | Any:
        """The facts of node `key`, or `default`."""
        facts = self.recent.get(key)
        if facts is not None:
            return facts
        present = self.present
        if not 0 < key < len(present) or not present[key]:
            return default
        cols, texts = self._columns, self._texts
        edges = cols["next_edges"][key]
        if edges is None:
            edges = (int(cols["edge_child"][key]), int(cols["edge_nr"][key]))
        return _new(NodeFacts, (texts[cols["name"][key]], int(cols["seq_nr"][key]), int(cols["topological_nr"][key]),
                                texts[cols["device"][key]], int(cols["thread"][key]), edges,
                                int(cols["frame"][key]), int(cols["step"][key]), int(cols["num_inputs"][key])))

    def __getitem__(self, key: int) -> NodeFacts:
        facts = self.get(key)
        if facts is None:
            raise KeyError(key)
        return facts

    def __contains__(self, key: int) -> bool:
        if key in self.recent:
            return True
        present = self.present
        return 0 < key < len(present) and present[key] == 1

    def __setitem__(self, key: int, facts: NodeFacts) -> None:
        self.recent[key] = facts

    def keys(self) -> list[int]:
        """Every node key with facts, ascending."""
        with self._lock:
            packed = np.flatnonzero(np.frombuffer(self.present, dtype=np.uint8)).tolist()
        return sorted(set(packed).union(self.recent))

    def __iter__(self) -> Iterator[int]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    # -- writing ------------------------------------------------------------------------------------------------------
    def write(self, keys: Sequence[int], **fields: Any) -> None:
        """Set `fields` (NodeFacts field names: one value per key, or one for all) of the nodes `keys` that have facts;
        a key with none is passed over."""
        if not len(keys):
            return
        recent = self.recent
        slots = [(_INDEX[name], values if _per_key(values) else _Same(values)) for name, values in fields.items()]
        with self._lock:
            in_recent = list(map(recent.__contains__, keys))
            for i in compress(range(len(keys)), in_recent):  # a tuple each, as its writer made it
                self._rewrite(keys[i], recent.get(keys[i]), i, slots)
            karr = np.asarray(keys, dtype=np.int64)
            present = np.frombuffer(self.present, dtype=np.uint8)
            inside = (karr > 0) & (karr < len(present))
            inside[inside] = present[karr[inside]] == 1
            inside &= ~np.asarray(in_recent, dtype=bool)
            del present
            if not inside.any():
                return
            converted: dict[str, Any] = {}
            try:
                for name, given in fields.items():
                    if _per_key(given):
                        for column, values in _columns(name, given, self._text_id).items():
                            converted[column] = values[inside]
                    else:  # one value for all: converted once, assigned to every row
                        for column, values in _columns(name, [given], self._text_id).items():
                            converted[column] = values[0]
            except (OverflowError, TypeError, ValueError):  # a value the columns cannot hold: those facts in `recent`
                for i in np.flatnonzero(inside).tolist():
                    self._rewrite(keys[i], self.get(keys[i]), i, slots)
                return
            rows = karr[inside]
            cols = self._columns
            for column, values in converted.items():
                cols[column][rows] = values

    def _rewrite(self, key: int, old: NodeFacts | None, i: int, slots: list) -> None:
        """Node `key`'s facts in `recent`, with the fields of `slots` (index, values) set to their `i`-th values."""
        if old is None or all(old[j] == values[i] for j, values in slots):
            return
        new = list(old)
        for j, values in slots:
            new[j] = values[i]
        self.recent[key] = _new(NodeFacts, new)

    def pack(self) -> None:
        """Move the facts of `recent` that fit into the columns (NOTE [packed node facts])."""
        recent = self.recent
        with self._lock:
            items = list(recent.items())
            try:
                keys, karr, facts, values = self._transpose(items)
            except (OverflowError, TypeError, ValueError):  # an odd key or value: find which, one at a time
                keys, karr, facts, values = self._transpose([item for item in items if self._fits(*item)])
            if not keys:
                return
            self._grow(int(karr.max()) + 1)
            cols = self._columns
            for name, column in values.items():
                cols[name][karr] = column
            present = np.frombuffer(self.present, dtype=np.uint8)
            present[karr] = 1
            del present  # no view may outlive the call: `present` grows in place
            moved = list(map(recent.pop, keys))
            for i in compress(range(len(keys)), map(is_not, moved, facts)):  # written meanwhile: that write wins
                recent.setdefault(keys[i], moved[i])

    def snapshot(self) -> Packed:
        """A copy of the table at one moment (for freezing a trace while other threads still write)."""
        with self._lock:
            recent = dict(self.recent)
            keys = np.flatnonzero(np.frombuffer(self.present, dtype=np.uint8)).astype(np.int64)
            texts = np.array(self._texts + [""], dtype=object)
            columns = {name: (texts[col[keys]] if name in _TEXTS else col[keys]) for name, col in self._columns.items()}
        return Packed(keys, columns, recent)

    # -- helpers ------------------------------------------------------------------------------------------------------
    def _text_id(self, texts: Any) -> Any:
        """The ids of `texts` (a str, or a sequence of them) in this table's texts, added as met."""
        ids = self._text_ids
        if isinstance(texts, str):
            found = ids.get(texts)
            if found is None:
                found = ids[texts] = len(self._texts)
                self._texts.append(texts)
            return found
        found = list(map(ids.get, texts))
        if None in found:
            for text in texts:
                if text not in ids:
                    if not isinstance(text, str):
                        raise TypeError(f"a node's name and device are str, not {text!r}")
                    ids[text] = len(self._texts)
                    self._texts.append(text)
            found = list(map(ids.__getitem__, texts))
        return found

    def _transpose(self, items: list) -> tuple[tuple, np.ndarray, tuple, dict[str, np.ndarray]]:
        """(keys, keys as int64, facts, field -> column) of the `items` (key, facts) whose keys the columns can reach;
        raises if a key or a value does not fit."""
        if not items:
            return (), np.zeros(0, dtype=np.int64), (), {}
        keys, facts = zip(*items, strict=True)
        karr = np.array(keys, dtype=np.int64)
        fits = (karr > 0) & (karr < len(self.present) + self.REACH)
        if not fits.all():
            keys, facts, karr = tuple(compress(keys, fits)), tuple(compress(facts, fits)), karr[fits]
            if not keys:
                return (), karr, (), {}
        values: dict[str, np.ndarray] = {}
        for name, column in zip(FIELDS, zip(*facts, strict=True), strict=True):
            values.update(_columns(name, column, self._text_id))
        return keys, karr, facts, values

    def _fits(self, key: Any, facts: Any) -> bool:
        """Whether one node's facts fit the columns (pack's slow path)."""
        try:
            if not 0 < np.array(key, dtype=np.int64) < len(self.present) + self.REACH:
                return False
            for name, value in zip(FIELDS, facts, strict=True):
                if name in _TEXTS:
                    if not isinstance(value, str):
                        return False
                elif name in _INTS:
                    np.array([value], dtype=_INTS[name])
                else:
                    len(value)
        except (OverflowError, TypeError, ValueError):
            return False
        return True

    def _grow(self, top: int) -> None:
        """Make the columns (and `present`) reach key `top - 1`, at least doubling them."""
        size = len(self.present)
        if top <= size:
            return
        new = max(top, 2 * size, 1024)
        for name, col in self._columns.items():
            grown = np.zeros(new, dtype=col.dtype) if col.dtype != object else np.empty(new, dtype=object)
            grown[:size] = col
            self._columns[name] = grown
        self.present.extend(bytes(new - size))


class _Same:
    """One value for every key, read as `values[i]` (NodeTable.write)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, i: int) -> Any:
        return self.value


def _per_key(values: Any) -> bool:
    return not isinstance(values, (str, int, np.integer))


def _columns(name: str, values: Iterable, text_id: Any) -> dict[str, np.ndarray]:
    """One field's values as its columns (raises if one does not fit)."""
    if name in _INTS:
        return {name: np.array(values, dtype=_INTS[name])}
    if name in _TEXTS:
        return {name: np.array(text_id(values), dtype=np.int32)}
    values = values if isinstance(values, (tuple, list)) else tuple(values)
    n = len(values)
    objects = np.fromiter(values, dtype=object, count=n)
    child = np.full(n, -1, dtype=np.int64)
    nr = np.zeros(n, dtype=np.int32)
    two = np.flatnonzero(np.fromiter(map(len, values), dtype=np.int64, count=n) == 2)
    if len(two):  # one edge each: as two ints, where both fit (a child key or 0, an input_nr of 32 bits)
        try:
            picked = values if len(two) == n else [values[i] for i in two.tolist()]
            pairs = np.fromiter(chain.from_iterable(picked), dtype=np.int64, count=2 * len(two)).reshape(-1, 2)
        except (OverflowError, TypeError, ValueError):
            fit = [i for i in two.tolist() if _int_pair(values[i])]
            two = np.asarray(fit, dtype=np.int64)
            pairs = np.array([values[i] for i in fit], dtype=np.int64).reshape(-1, 2)
        info = np.iinfo(np.int32)
        ok = (pairs[:, 0] >= 0) & (pairs[:, 1] >= info.min) & (pairs[:, 1] <= info.max)
        two = two[ok]
        child[two], nr[two], objects[two] = pairs[ok, 0], pairs[ok, 1], None
    return {"next_edges": objects, "edge_child": child, "edge_nr": nr}


def _int_pair(edge: Any) -> bool:
    try:
        np.array(edge, dtype=np.int64)
    except (OverflowError, TypeError, ValueError):
        return False
    return True
