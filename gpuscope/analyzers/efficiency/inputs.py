"""A host op's recorded inputs (``Input Dims``, ``Input type``, ``Concrete Inputs``) as Python values."""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass

from gpuscope.model.trace import OpShape

# Kineto's ``Input type`` spellings (c10 scalar type names) -> bytes an element and the peak type that applies.
_TYPES: dict[str, tuple[int, str]] = {
    "float": (4, "fp32"), "double": (8, "fp64"), "c10::Half": (2, "fp16"), "c10::BFloat16": (2, "bf16"),
    "c10::Float8_e4m3fn": (1, "fp8"), "c10::Float8_e5m2": (1, "fp8"), "c10::Float8_e4m3fnuz": (1, "fp8"),
    "c10::Float8_e5m2fnuz": (1, "fp8"), "signed char": (1, "int8"), "unsigned char": (1, "int8"),
    "long int": (8, "int64"), "int": (4, "int32"), "bool": (1, "bool"), "short int": (2, "int16"),
}


@dataclass(frozen=True)
class Inputs:
    """One call's inputs: a shape per input (None for a non-tensor), its type name, and its concrete value."""

    dims: tuple[tuple[int, ...] | None, ...]
    types: tuple[str, ...]
    concrete: tuple[str, ...]

    def shape(self, i: int) -> tuple[int, ...] | None:
        """Input ``i``'s shape when it is a tensor (a 0-d tensor is ``()``), else None."""
        if i >= len(self.dims):
            return None
        return self.dims[i] if self.is_tensor(i) else None

    def is_tensor(self, i: int) -> bool:
        """Input ``i`` is a tensor: by its recorded type; in a trace that records no types (Kineto of early 2021),
        by a shape with at least one dimension (a scalar's and a list's are empty there; a 0-d tensor reads as
        none, which no count here needs)."""
        if i >= len(self.dims) or self.dims[i] is None:
            return False
        if not self.types:
            return len(self.dims[i] or ()) > 0
        t = self.types[i] if i < len(self.types) else ""
        return t in _TYPES

    def element_bytes(self, i: int) -> int:
        t = self.types[i] if i < len(self.types) else ""
        return _TYPES.get(t, (0, ""))[0]

    def dtype(self, i: int) -> str | None:
        """The peak type input ``i`` runs in ("fp32", "bf16", ...); None for a non-tensor or unknown type."""
        t = self.types[i] if i < len(self.types) else ""
        return _TYPES[t][1] if t in _TYPES else None

    def tensor_bytes(self, i: int) -> int:
        shape = self.shape(i)
        return 0 if shape is None else math.prod(shape) * self.element_bytes(i)

    def value(self, i: int) -> object:
        """Input ``i``'s concrete value (an int, a float, a bool, a list of ints), or None where not recorded."""
        if i >= len(self.concrete) or not self.concrete[i]:
            return None
        try:
            return ast.literal_eval(self.concrete[i])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None

    def ints(self, i: int) -> tuple[int, ...] | None:
        """A list-of-ints argument (stride, padding ...): its value, or None where not recorded."""
        v = self.value(i)
        if isinstance(v, int) and not isinstance(v, bool):
            return (v,)
        if isinstance(v, list | tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return tuple(v)
        return None

    def flag(self, i: int) -> bool | None:
        v = self.value(i)
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v in ("True", "False"):
            return v == "True"
        return None


def parse(shape: OpShape) -> Inputs | None:
    """The inputs a recorded shape entry describes; None where its text is not what Kineto writes."""
    try:
        dims = json.loads(shape.dims)
    except (ValueError, RecursionError):
        return None
    if not isinstance(dims, list):
        return None
    out: list[tuple[int, ...] | None] = []
    for d in dims:
        if isinstance(d, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in d):
            out.append(tuple(d))
        else:
            out.append(None)  # a list of tensors, a scalar...
    concrete: tuple[str, ...] = ()
    if shape.concrete:
        try:
            values = json.loads(shape.concrete)
            concrete = tuple(v if isinstance(v, str) else json.dumps(v) for v in values) \
                if isinstance(values, list) else ()
        except (ValueError, RecursionError):
            concrete = ()
    return Inputs(dims=tuple(out), types=shape.types, concrete=concrete)
