"""`torch.utils.data` programs (Dataset, TensorDataset, DataLoader, samplers, random_split, Subset, collate), run on
engine and torch by test_data_parity.py. Each is `fn(t, p)`; see parity.py.

Shuffled orders come from each library's own generator, so those programs compare what does not depend on the
values drawn: batch shapes, the multiset of samples, that a seed repeats the order, and the seq_nrs taken.
"""
from __future__ import annotations

import collections
from typing import Callable

PROGRAMS: dict[str, Callable] = {}

X52 = [[0.5, -1.2], [1.5, 0.3], [0.0, 0.9], [-0.4, 1.3], [2.0, 0.1]]
Y5 = [0, 1, 1, 0, 2]


def program(name: str) -> Callable:
    def register(fn: Callable) -> Callable:
        PROGRAMS[name] = fn
        return fn
    return register


def _data(t):
    return t.utils.data


@program("TensorDataset and DataLoader in order, then a training step per batch")
def _loader_in_order(t, p):
    d = _data(t)
    x, y = p.const(X52, dtype="float32"), t.tensor(Y5)
    ds = d.TensorDataset(x, y)
    p.value("len ds", len(ds))
    p.value("ds[1]", ds[1])
    p.value("ds[-1]", ds[-1])
    loader = d.DataLoader(ds, batch_size=2)
    p.value("len loader", len(loader))
    w = p.leaf("w", [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]], dtype="float32")
    for i, (xb, yb) in enumerate(loader):
        p.value(f"batch {i}", (xb, yb))
        loss = t.nn.functional.cross_entropy(xb @ w, yb)
        p.watch(loss, tag=f"loss {i}")
        loss.backward()
    p.value("w.grad", w.grad)
    p.counter("end")


@program("DataLoader drop_last, batch_size 1 and batch_size None")
def _loader_drop_last(t, p):
    d = _data(t)
    ds = d.TensorDataset(p.const(X52), t.tensor(Y5))
    for bs, drop in ((2, True), (2, False), (3, True), (5, True), (6, True), (6, False), (1, False)):
        loader = d.DataLoader(ds, batch_size=bs, drop_last=drop)
        p.value(f"len {bs} {drop}", len(loader))
        p.value(f"batches {bs} {drop}", [b for b in loader])
    p.value("no batching", list(d.DataLoader(ds, batch_size=None)))
    p.counter("end")


@program("DataLoader over tensors that require grad: Select and Stack nodes")
def _loader_with_grad(t, p):
    d = _data(t)
    x = p.leaf("x", X52)
    loader = d.DataLoader(d.TensorDataset(x), batch_size=3)
    batches = [b for (b,) in loader]
    p.watch(*batches)
    (batches[0].sum() + batches[1].sum()).backward()
    p.value("x.grad", x.grad)
    p.counter("end")


@program("DataLoader shuffle: every sample once, a seed repeats the order")
def _loader_shuffle(t, p):
    d = _data(t)
    ds = d.TensorDataset(t.arange(10), t.arange(10) * 10)
    loader = d.DataLoader(ds, batch_size=3, shuffle=True)
    p.value("len", len(loader))

    def epoch():
        batches = list(loader)
        p.value("shapes", [tuple(a.shape) for a, _ in batches])
        p.value("pairs", all(bool((b == a * 10).all()) for a, b in batches))
        return [int(v) for a, _ in batches for v in a]

    t.manual_seed(3)
    first, second = epoch(), epoch()
    t.manual_seed(3)
    again = epoch()
    p.value("every sample once", sorted(first) == list(range(10)))
    p.value("repeats under the seed", first == again)
    p.value("epochs differ", first != second)
    dl = d.DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)
    p.value("drop_last shuffled", [tuple(a.shape) for a, _ in dl])
    g = t.Generator().manual_seed(5)
    one = [int(v) for a, _ in d.DataLoader(ds, batch_size=4, shuffle=True, generator=g) for v in a]
    g.manual_seed(5)
    two = [int(v) for a, _ in d.DataLoader(ds, batch_size=4, shuffle=True, generator=g) for v in a]
    p.value("generator= repeats", (one == two, sorted(one) == list(range(10))))
    p.counter("end")


def _dict_dataset(t):
    class Pairs(t.utils.data.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return {"x": t.tensor([float(i), -float(i)]), "y": i, "w": 0.5 * i, "name": f"s{i}"}
    return Pairs


@program("default collate: dicts, tuples, lists, ints, floats, strings, namedtuples, numpy arrays")
def _collate(t, p):
    import numpy as np

    d = _data(t)
    ds = _dict_dataset(t)(5)
    p.value("dict batches", [(b["x"], b["y"], b["w"], b["name"]) for b in d.DataLoader(ds, batch_size=2)])
    c = d.default_collate
    p.value("tuples", c([(1, 2.0), (3, 4.0)]))
    p.value("lists", c([[1, 2], [3, 4]]))
    p.value("ints", c([1, 2, 3]))
    p.value("floats", c([1.5, 2.5]))
    p.value("numpy", (c([np.array([1.0, 2.0]), np.array([3.0, 4.0])]), c([np.float64(1.0), np.float64(2.0)])))
    point = collections.namedtuple("Point", ["a", "b"])
    out = c([point(1, 2.0), point(3, 4.0)])
    p.value("namedtuple", (type(out).__name__, out.a, out.b))
    p.value("nested", c([{"a": (t.tensor([1.0]), 2)}, {"a": (t.tensor([3.0]), 4)}]))
    p.run("ragged lists", lambda: c([[1, 2], [3]]))
    p.run("an object", lambda: c([object(), object()]))
    p.run("ragged tensors", lambda: c([t.tensor([1.0]), t.tensor([1.0, 2.0])]))
    p.value("convert", d.default_convert([np.array([1, 2]), 3]))
    p.value("collate_fn", list(d.DataLoader(ds, batch_size=2, collate_fn=lambda b: len(b))))
    p.counter("end")


@program("random_split and Subset")
def _random_split(t, p):
    d = _data(t)
    ds = d.TensorDataset(t.arange(10))
    t.manual_seed(0)
    a, b = d.random_split(ds, [7, 3])
    p.value("types", (type(a).__name__, len(a), len(b)))
    seen = sorted(int(a[i][0]) for i in range(len(a))) + sorted(int(b[i][0]) for i in range(len(b)))
    p.value("disjoint cover", sorted(seen) == list(range(10)))
    t.manual_seed(0)
    a2, _ = d.random_split(ds, [7, 3])
    p.value("repeats", a.indices == a2.indices)
    parts = d.random_split(ds, [0.5, 0.3, 0.2], generator=t.Generator().manual_seed(1))
    p.value("fractions", [len(s) for s in parts])
    p.value("uneven fractions", [len(s) for s in d.random_split(range(7), [0.5, 0.5])])
    p.run("bad sum", lambda: d.random_split(ds, [4, 4]))
    p.run("bad fraction", lambda: d.random_split(ds, [1.5, -0.5]))
    sub = d.Subset(ds, [4, 1, 8])
    p.value("subset", (len(sub), sub[0], sub[-1], sub.indices))
    p.value("subset batches", list(d.DataLoader(sub, batch_size=2)))
    p.value("concat", (len(ds + sub), (ds + sub)[11], (ds + sub)[-1]))
    p.run("size mismatch", lambda: d.TensorDataset(t.zeros(3), t.zeros(4)))
    p.run("base getitem", lambda: d.Dataset()[0])
    p.counter("end")


@program("samplers and DataLoader's argument errors")
def _samplers(t, p):
    d = _data(t)
    ds = d.TensorDataset(t.arange(5))
    p.value("sequential", list(d.SequentialSampler(ds)))
    p.value("batch sampler", (list(d.BatchSampler(range(5), 2, False)), len(d.BatchSampler(range(5), 2, True))))
    t.manual_seed(0)
    p.value("random sampler", (sorted(d.RandomSampler(ds)), len(d.RandomSampler(ds, num_samples=7))))
    p.value("random with replacement", len(list(d.RandomSampler(ds, replacement=True, num_samples=40))))
    more = list(d.RandomSampler(ds, num_samples=7))
    p.value("more samples than data", (len(more), sorted(set(more)), sorted(more[:5])))
    p.value("subset random", sorted(d.SubsetRandomSampler([3, 1, 4])))
    p.value("sampler=", list(d.DataLoader(ds, batch_size=2, sampler=[4, 0, 2])))
    p.value("batch_sampler=", list(d.DataLoader(ds, batch_sampler=[[0, 1], [4]])))
    p.run("shuffle and sampler", lambda: d.DataLoader(ds, shuffle=True, sampler=[0]))
    p.run("batch_sampler and batch_size", lambda: d.DataLoader(ds, batch_size=2, batch_sampler=[[0]]))
    p.run("drop_last without batch_size", lambda: d.DataLoader(ds, batch_size=None, drop_last=True))
    p.run("negative workers", lambda: d.DataLoader(ds, num_workers=-1))
    p.run("bad batch_size", lambda: d.BatchSampler(range(3), 0, False))
    p.run("bad num_samples", lambda: d.RandomSampler(ds, num_samples=0))
    p.counter("end")


@program("IterableDataset batches and its DataLoader errors")
def _iterable(t, p):
    d = _data(t)

    class Stream(d.IterableDataset):
        def __iter__(self):
            return iter(t.tensor([float(i)]) for i in range(5))

    p.value("batches", list(d.DataLoader(Stream(), batch_size=2)))
    p.value("drop_last", list(d.DataLoader(Stream(), batch_size=2, drop_last=True)))
    p.value("one by one", list(d.DataLoader(Stream(), batch_size=None)))
    p.run("shuffle", lambda: d.DataLoader(Stream(), shuffle=True))
    p.run("len", lambda: len(d.DataLoader(Stream())))
    p.counter("end")


@program("DataLoader with worker processes: the same batches in order, and the sampler read ahead as torch's")
def _workers(t, p):
    d = _data(t)
    pulls = []

    class Logged(d.Sampler):
        """Logs each index the loader takes, which torch's worker iterator does ahead of the batches it yields."""

        def __init__(self, n):
            self.n = n

        def __iter__(self):
            for i in range(self.n):
                pulls.append(("pull", i))
                yield i

        def __len__(self):
            return self.n

    ds = d.TensorDataset(t.arange(7.0).reshape(7, 1), t.arange(7) * 10)
    for workers, prefetch in ((1, 2), (2, 1), (2, 3)):
        pulls.clear()
        loader = d.DataLoader(ds, batch_size=2, sampler=Logged(7), num_workers=workers, prefetch_factor=prefetch)
        it = iter(loader)
        pulls.append(("iter",))
        for xb, yb in it:
            pulls.append(("batch", xb.tolist(), yb.tolist()))
        p.value(f"workers {workers} prefetch {prefetch}", list(pulls))
    loader = d.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=True)
    p.value("persistent, two epochs", [[b.tolist() for b, _ in loader] for _ in range(2)])

    def after(epochs, persistent):
        """The generator's next values after `epochs` passes: torch draws its workers' base seed once per worker
        iterator, which persistent workers keep from one epoch to the next."""
        t.manual_seed(0)
        loader = d.DataLoader(ds, batch_size=3, num_workers=2, persistent_workers=persistent)
        for _ in range(epochs):
            list(loader)
        return t.rand(2).tolist()
    persistent_two = after(2, True)
    p.value("seeds drawn by persistent workers", (persistent_two == after(1, False), persistent_two == after(2, False)))
    x = p.leaf("x", X52)
    loader = d.DataLoader(d.TensorDataset(x.detach() * 2, t.tensor(Y5)), batch_size=2, num_workers=2)
    w = p.leaf("w", [[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]])
    for i, (xb, yb) in enumerate(loader):
        loss = t.nn.functional.cross_entropy(xb @ w, yb)
        p.watch(loss, tag=f"loss {i}")
        loss.backward()
    p.value("w.grad", w.grad)
    p.counter("end")
