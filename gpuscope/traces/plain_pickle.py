"""Unpickling a whole pickle held in memory (a flight-recorder dump) as plain data only: dicts, lists, tuples,
sets, strings, bytes, numbers, booleans and None, within the budgets of ``limits.PickleBudget``.

Nothing a pickle names is imported or called (``plain_data``). A pickle up to 64 KiB is read here by the
streaming reader, whose memo and time its size bounds; a larger one by CPython's C unpickler in a child process
under the operating system's limits of memory and CPU time (``pickle_child``), which hands back what it read,
pickled again (Python's own pickler of plain data, read here by the same restricted unpickler).
"""

from __future__ import annotations

import io
import pickle
import sys
from typing import Any

from gpuscope.traces.limits import LimitSettingError, PickleBudget, pickle_budget, size_words
from gpuscope.traces.pickle_child import FORK, child_limits, run_limited
from gpuscope.traces.pickle_stream import load_stream
from gpuscope.traces.plain_data import PLAIN_OPCODES, BudgetSpent, NotPlainData, PlainUnpickler, load_plain

__all__ = ["PLAIN_OPCODES", "BudgetSpent", "NotPlainData", "loads_plain"]


def loads_plain(data: bytes, *, budget: PickleBudget | None = None) -> Any:
    """The plain data a pickle holds; ``NotPlainData`` (one line) for anything else, before any of it is run, and
    ``BudgetSpent`` (a ``NotPlainData``) for one past its budget."""
    try:
        budget = budget or pickle_budget()
    except LimitSettingError as exc:
        raise BudgetSpent(f"{exc.setting}: {exc}") from None
    if len(data) > budget.inflated_bytes:
        raise BudgetSpent(f"{size_words(len(data))} of pickle: past {budget.inflated_words()}")
    if len(data) <= budget.in_process_bytes or not FORK:
        value = load_stream(io.BytesIO(data), size_bytes=len(data))
        if isinstance(value, _CONTAINERS):
            _check_nesting(value, budget.nesting)
        return value
    body, _ = run_limited(lambda: (_load_and_pickle(data, budget.nesting), []),
                          child_limits(budget, len(data), c_unpickler=True))
    return PlainUnpickler(io.BytesIO(body)).load()


def _load_and_pickle(data: bytes, nesting: int) -> bytes:  # pragma: no cover - runs in the child
    value = load_plain(io.BytesIO(data))
    sys.setrecursionlimit(nesting + 50)  # the pickler recurses once a level (and the frames below it)
    try:
        return pickle.dumps(value, protocol=5)
    except RecursionError:
        raise _too_deep(nesting) from None


def _too_deep(nesting: int) -> BudgetSpent:
    return BudgetSpent(f"nested deeper than {nesting:,} levels, the reader's limit")


_CONTAINERS = (dict, list, tuple, set, frozenset)


def _check_nesting(value: Any, nesting: int) -> None:
    """``BudgetSpent`` for a value nested deeper than ``nesting`` levels: a walk without recursion that visits
    each container once (a shared one is not walked again)."""
    seen: set[int] = set()
    level: list[Any] = [value]
    for _ in range(nesting):
        below: list[Any] = []
        for item in level:
            for v in item.values() if isinstance(item, dict) else item:
                if isinstance(v, _CONTAINERS) and id(v) not in seen:
                    seen.add(id(v))
                    below.append(v)
        if not below:
            return
        level = below
    raise _too_deep(nesting)
