"""The precision a host op ran its inputs in, from Kineto's ``args["Input type"]`` (present with ``record_shapes``).

Kineto writes one entry per input: a tensor's dtype as c10 names it (``float``, ``c10::BFloat16``,
``c10::Float8_e4m3fn``, ``signed char``, ``long int``, ...) and ``Scalar``, ``ScalarList``, ``TensorList`` or ``""``
for inputs that are not a single tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gpuscope.model.trace import Precision

_FLOATING = {
    "double": Precision.FP64,
    "float": Precision.FP32,
    "c10::Half": Precision.FP16,
    "c10::BFloat16": Precision.BF16,
}
_FLOAT8_PREFIX = "c10::Float8_"  # e4m3fn, e5m2, e4m3fnuz, e5m2fnuz, e8m0fnu
_INT8 = frozenset({"signed char", "unsigned char", "c10::qint8", "c10::quint8"})
_NOT_A_TENSOR = frozenset({"", "Scalar", "ScalarList", "TensorList", "GenericList", "None"})
_LOWEST_FIRST = (Precision.FP8, Precision.BF16, Precision.FP16, Precision.FP32, Precision.FP64)


def classify(input_types: Sequence[str]) -> Precision:
    """The lowest-precision floating type among the inputs; INT8 when int8 tensors are the only low-precision
    inputs and none is floating; OTHER for tensors of other types only (int64, bool, complex); UNKNOWN when
    no input is a tensor of known dtype."""
    found: set[Precision] = set()
    for name in input_types:
        if not isinstance(name, str) or name in _NOT_A_TENSOR:
            continue
        if name.startswith(_FLOAT8_PREFIX):
            found.add(Precision.FP8)
        elif name in _FLOATING:
            found.add(_FLOATING[name])
        elif name in _INT8:
            found.add(Precision.INT8)
        else:
            found.add(Precision.OTHER)
    for precision in _LOWEST_FIRST:
        if precision in found:
            return precision
    for precision in (Precision.INT8, Precision.OTHER):
        if precision in found:
            return precision
    return Precision.UNKNOWN


def classify_table(distinct: Sequence[Sequence[str] | None]) -> npt.NDArray[np.uint8]:
    """``classify`` of each distinct input-type list once (None: the event had none), as a lookup table."""
    return np.array([classify(types) if types is not None else Precision.UNKNOWN for types in distinct],
                    dtype=np.uint8)
