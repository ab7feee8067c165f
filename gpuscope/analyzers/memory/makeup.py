"""What each allocation holds, from the phase it was made in and how long it lived, and what was live at a moment
grouped by where it was made.

- made while building or moving the model: parameters;
- made by ``AccumulateGrad``, or in backward and still live when the next forward or optimizer step begins:
  gradients (made in backward and freed within it: temporaries);
- made in an optimizer step and still live when it ends: optimizer state (freed within it: temporaries);
- made in forward and still live when backward begins (or in a recording without backward): activations (freed
  before backward: temporaries);
- anything else, and what was made before the recording began: unknown.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from gpuscope.analyzers.memory.history import I64, DeviceHistory, Phase
from gpuscope.model.memory import CATEGORIES, Category, CategoryShare, PeakGroup

MAX_GROUPS = 50
"""Places listed at the peak, largest first; the makeup counts them all."""
_CODE = {c: i for i, c in enumerate(CATEGORIES)}


def categories(h: DeviceHistory) -> npt.NDArray[np.uint8]:
    """Each allocation's category, as a code into ``CATEGORIES``."""
    al = h.allocations
    n = len(h)
    out = np.full(len(al), _CODE["unknown"], dtype=np.uint8)
    phase = al.phase
    out[phase == Phase.INIT] = _CODE["parameters"]
    out[phase == Phase.GRADIENT] = _CODE["gradients"]
    fwd = phase == Phase.FORWARD
    backward_starts = _next_event(h, al.start, (Phase.BACKWARD, Phase.GRADIENT), n)
    out[fwd] = np.where((backward_starts[fwd] < n) & (al.end[fwd] <= backward_starts[fwd]), _CODE["temporaries"],
                        _CODE["activations"])
    bwd = phase == Phase.BACKWARD
    backward_ends = _next_event(h, al.start, (Phase.FORWARD, Phase.OPTIMIZER, Phase.INIT), n)
    out[bwd] = np.where(al.end[bwd] >= backward_ends[bwd], _CODE["gradients"], _CODE["temporaries"])
    opt = phase == Phase.OPTIMIZER
    step_ends = np.minimum(_next_event(h, al.start, (Phase.FORWARD, Phase.BACKWARD, Phase.INIT), n),
                           _annotated_step_end(h, al.start, n))
    out[opt] = np.where(al.end[opt] >= step_ends[opt], _CODE["optimizer_state"], _CODE["temporaries"])
    return out


def _next_event(h: DeviceHistory, start: I64, phases: tuple[Phase, ...], n: int) -> I64:
    """For each allocation, the first allocation event after it made in one of ``phases`` (n if none)."""
    events = h.alloc_events[np.isin(h.alloc_phase, phases)]
    if not events.size:
        return np.full(start.shape, n, dtype=np.int64)
    pos = np.searchsorted(events, start, side="right")
    return np.where(pos < events.size, events[np.minimum(pos, events.size - 1)], n)


def _annotated_step_end(h: DeviceHistory, start: I64, n: int) -> I64:
    """For an allocation made inside an annotated optimizer step, the first event after the step's end."""
    out = np.full(start.shape, n, dtype=np.int64)
    times = h.time_us[np.clip(start, 0, max(len(h) - 1, 0))] if len(h) else np.zeros(start.shape, np.int64)
    for begin, end in h.phase_ends_us:
        inside = (start >= 0) & (times >= begin) & (times <= end)
        out[inside] = np.minimum(out[inside], np.searchsorted(h.time_us, end, side="right"))
    return out


def makeup(h: DeviceHistory, cats: npt.NDArray[np.uint8], index: int) -> tuple[CategoryShare, ...]:
    """Bytes live after event ``index`` by category, with their shares of the whole (every category listed)."""
    live = h.allocations.live_at(index)
    per = np.bincount(cats[live], weights=h.allocations.size_bytes[live], minlength=len(CATEGORIES))
    total = float(per.sum())
    return tuple(CategoryShare(category=c, bytes=int(per[i]), share=float(per[i]) / total if total else 0.0)
                 for i, c in enumerate(CATEGORIES))


def live_groups(h: DeviceHistory, cats: npt.NDArray[np.uint8], index: int, *,
                limit: int = MAX_GROUPS) -> tuple[PeakGroup, ...]:
    """What was live after event ``index``, by the place it was made, largest first."""
    al = h.allocations
    live = np.flatnonzero(al.live_at(index))
    if not live.size:
        return ()
    sites = al.site[live]
    sizes = al.size_bytes[live]
    total = np.bincount(sites, weights=sizes)
    count = np.bincount(sites)
    by_cat = np.zeros((total.size, len(CATEGORIES)))
    np.add.at(by_cat, (sites, cats[live]), sizes)
    order = [int(s) for s in np.argsort(-total, kind="stable") if count[s]][:limit]
    out = []
    for s in order:
        site = h.sites[s]
        category: Category = CATEGORIES[int(np.argmax(by_cat[s]))]
        out.append(PeakGroup(frames=site.frames or None, op=site.op, bytes=int(total[s]), count=int(count[s]),
                             category=category, label=site.label))
    return tuple(out)


def live_curves(h: DeviceHistory, cats: npt.NDArray[np.uint8], wanted: tuple[Category, ...]) -> dict[Category, I64]:
    """Bytes live after each event, for each of ``wanted`` categories (one array of ``len(h)`` each)."""
    al = h.allocations
    n = len(h)
    out: dict[Category, I64] = {}
    for category in wanted:
        mine = cats == _CODE[category]
        delta = np.zeros(n + 1, dtype=np.int64)
        np.add.at(delta, np.clip(al.start[mine], 0, n), al.size_bytes[mine])
        np.add.at(delta, np.clip(al.end[mine], 0, n), -al.size_bytes[mine])
        out[category] = np.cumsum(delta[:n])
    return out
