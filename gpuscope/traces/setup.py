"""What a trace file says of the job's set-up beside its events, kept in ``RankTrace.attrs``.

- ``cuda_runtime_version`` / ``cuda_driver_version``: Kineto's top-level metadata (e.g. 12010 for 12.1).
- ``model_input``: the first call (earliest start) of a model layer operator (convolution, linear, matmul,
  embedding), with its ``Input Dims`` and ``Input type`` as recorded with ``record_shapes=True``, as JSON text.
  Its first input is the batch as the model sees it.

Only layer operators' shapes are decoded (they are kept raw while the events are read), so a trace of millions
of operators pays for a handful of shape lists.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from gpuscope.traces.events import Args, Event

LAYER_OPS = frozenset({
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm",
    "aten::embedding", "aten::embedding_bag", "aten::lstm", "aten::gru",
})
"""Operators a model's first layer calls with the batch as its first input."""
CUDA_VERSION_KEYS = ("cuda_runtime_version", "cuda_driver_version")


class FirstLayerCall:
    """Keeps the earliest call of a layer operator seen so far, across chunks of events."""

    def __init__(self) -> None:
        self._best: tuple[float, str, str, tuple[str, ...]] | None = None

    def add(self, xs: list[Event], args: list[Args]) -> None:
        for e, a in zip(xs, args):
            if e.name not in LAYER_OPS or (self._best is not None and e.ts >= self._best[0]):
                continue
            dims = a.input_dims if len(a.input_dims) else a.input_dims_2021
            if not len(dims):
                continue
            types = tuple(t for t in a.input_types or () if isinstance(t, str))
            self._best = (e.ts, e.name, _compact(bytes(dims)), types)

    def join(self, later: FirstLayerCall) -> None:
        """Take in the call ``later`` kept from the events after this one's: the earlier start wins, and of two at
        one time the one read first, as when one reader reads them all."""
        if later._best is not None and (self._best is None or later._best[0] < self._best[0]):
            self._best = later._best

    def attrs(self) -> dict[str, str]:
        if self._best is None:
            return {}
        _, op, shapes, types = self._best
        return {"model_input": json.dumps({"op": op, "shapes": shapes, "types": list(types)})}


def version_attrs(top: dict[str, Any]) -> dict[str, str]:
    """The CUDA versions among the trace's top-level keys, as text (an int such as 12010, or a string)."""
    out: dict[str, str] = {}
    for key in CUDA_VERSION_KEYS:
        value = top.get(key)
        if isinstance(value, int | str) and not isinstance(value, bool) and str(value).strip():
            out[key] = str(value).strip()[:40]
    return out


def _compact(raw: bytes) -> str:
    """The shapes list in one spelling (``[[32, 3, 224, 224], []]``) whatever spacing the file used."""
    try:
        return json.dumps(msgspec.json.decode(raw))[:400]
    except msgspec.DecodeError:
        return raw.decode("utf-8", "replace")[:400]
