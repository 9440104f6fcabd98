"""libstdc++'s std::nth_element, std::sort and std::partial_sort, step for step, for topk's order among equal
values: torch's CPU kernel selects with them, and which of several equal elements comes first (so which index
topk returns, and where its grad goes) is whatever their swaps leave. Python lists of (value, index) pairs;
`less(x, y)` is the comparator. Used only for rows with ties: without ties the order is the values' own.
"""
from __future__ import annotations

from typing import Callable

Less = Callable[[tuple, tuple], bool]

_S_THRESHOLD = 16


def _lg(n: int) -> int:
    return n.bit_length() - 1


def nth_element(a: list, first: int, nth: int, last: int, less: Less) -> None:
    if first == last or nth == last:
        return
    _introselect(a, first, nth, last, _lg(last - first) * 2, less)


def _introselect(a: list, first: int, nth: int, last: int, depth_limit: int, less: Less) -> None:
    while last - first > 3:
        if depth_limit == 0:
            _heap_select(a, first, nth + 1, last, less)
            a[first], a[nth] = a[nth], a[first]
            return
        depth_limit -= 1
        cut = _unguarded_partition_pivot(a, first, last, less)
        if cut <= nth:
            first = cut
        else:
            last = cut
    _insertion_sort(a, first, last, less)


def sort(a: list, first: int, last: int, less: Less) -> None:
    if first != last:
        _introsort_loop(a, first, last, _lg(last - first) * 2, less)
        _final_insertion_sort(a, first, last, less)


def partial_sort(a: list, first: int, middle: int, last: int, less: Less) -> None:
    _heap_select(a, first, middle, last, less)
    _sort_heap(a, first, middle, less)


def _introsort_loop(a: list, first: int, last: int, depth_limit: int, less: Less) -> None:
    while last - first > _S_THRESHOLD:
        if depth_limit == 0:
            partial_sort(a, first, last, last, less)
            return
        depth_limit -= 1
        cut = _unguarded_partition_pivot(a, first, last, less)
        _introsort_loop(a, cut, last, depth_limit, less)
        last = cut


def _final_insertion_sort(a: list, first: int, last: int, less: Less) -> None:
    if last - first > _S_THRESHOLD:
        _insertion_sort(a, first, first + _S_THRESHOLD, less)
        for i in range(first + _S_THRESHOLD, last):
            _unguarded_linear_insert(a, i, less)
    else:
        _insertion_sort(a, first, last, less)


def _move_median_to_first(a: list, result: int, x: int, y: int, z: int, less: Less) -> None:
    if less(a[x], a[y]):
        if less(a[y], a[z]):
            pick = y
        elif less(a[x], a[z]):
            pick = z
        else:
            pick = x
    elif less(a[x], a[z]):
        pick = x
    elif less(a[y], a[z]):
        pick = z
    else:
        pick = y
    a[result], a[pick] = a[pick], a[result]


def _unguarded_partition(a: list, first: int, last: int, pivot: int, less: Less) -> int:
    while True:
        while less(a[first], a[pivot]):
            first += 1
        last -= 1
        while less(a[pivot], a[last]):
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _unguarded_partition_pivot(a: list, first: int, last: int, less: Less) -> int:
    mid = first + (last - first) // 2
    _move_median_to_first(a, first, first + 1, mid, last - 1, less)
    return _unguarded_partition(a, first + 1, last, first, less)


def _insertion_sort(a: list, first: int, last: int, less: Less) -> None:
    if first == last:
        return
    for i in range(first + 1, last):
        if less(a[i], a[first]):
            val = a[i]
            a[first + 1:i + 1] = a[first:i]
            a[first] = val
        else:
            _unguarded_linear_insert(a, i, less)


def _unguarded_linear_insert(a: list, last: int, less: Less) -> None:
    val = a[last]
    nxt = last - 1
    while less(val, a[nxt]):
        a[last] = a[nxt]
        last = nxt
        nxt -= 1
    a[last] = val


def _heap_select(a: list, first: int, middle: int, last: int, less: Less) -> None:
    _make_heap(a, first, middle, less)
    for i in range(middle, last):
        if less(a[i], a[first]):
            _pop_heap(a, first, middle, i, less)


def _make_heap(a: list, first: int, last: int, less: Less) -> None:
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(a, first, parent, length, a[first + parent], less)
        if parent == 0:
            return
        parent -= 1


def _pop_heap(a: list, first: int, last: int, result: int, less: Less) -> None:
    value = a[result]
    a[result] = a[first]
    _adjust_heap(a, first, 0, last - first, value, less)


def _adjust_heap(a: list, first: int, hole: int, length: int, value: tuple, less: Less) -> None:
    top = hole
    child = hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if less(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length & 1 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and less(a[first + parent], value):
        a[first + hole] = a[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    a[first + hole] = value


def _sort_heap(a: list, first: int, last: int, less: Less) -> None:
    while last - first > 1:
        last -= 1
        _pop_heap(a, first, last, last, less)


def topk_indices(row: list, k: int, largest: bool, sorted_: bool) -> list[int]:
    """The indices torch's CPU topk picks from `row` (Python numbers), in its order: partial_sort when
    k * 64 <= len(row), else nth_element and, if `sorted_`, a sort of the first k - 1; NaN counts as largest."""
    n = len(row)
    if k == 0:
        return []
    queue = [(v, j) for j, v in enumerate(row)]
    if largest:
        def less(x: tuple, y: tuple) -> bool:
            return (x[0] != x[0] and y[0] == y[0]) or x[0] > y[0]
    else:
        def less(x: tuple, y: tuple) -> bool:
            return (x[0] == x[0] and y[0] != y[0]) or x[0] < y[0]
    if k * 64 <= n:
        partial_sort(queue, 0, k, n, less)
    else:
        nth_element(queue, 0, k - 1, n, less)
        if sorted_:
            sort(queue, 0, k - 1, less)
    return [j for _, j in queue[:k]]
