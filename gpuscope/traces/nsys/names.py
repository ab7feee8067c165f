"""Event names as a Kineto trace spells them, so every rule that reads a name reads an nsys profile alike.

- Kernels: the demangled name (``StringIds``), as CUPTI gives it to Kineto.
- Copies: ``Memcpy HtoD (Pageable -> Device)``, memsets: ``Memset (Device)``, from the copy kind and memory
  kinds (the export's ``ENUM_CUDA_MEMCPY_OPER`` and ``ENUM_CUDA_MEM_KIND`` where it has them), as Kineto writes them.
- CUDA API calls without nsys's version suffix: ``cudaLaunchKernel_v7000`` is ``cudaLaunchKernel``.
- Synchronisations: ``Event Sync``, ``Stream Wait Event``, ``Stream Sync``, ``Context Sync``, as Kineto's
  ``cuda_sync`` events.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from gpuscope.traces.nsys.database import Export

I64 = npt.NDArray[np.int64]
MEMORY_KINDS = {0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
                6: "Managed Static", 7: "Unknown"}
"""``ENUM_CUDA_MEM_KIND`` as nsys 2022.1 to 2026.3 number it (not CUPTI's own numbering)."""
COPY_KINDS = {0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD",
              9: "HtoH", 10: "PtoP", 11: "HtoD", 12: "DtoH", 13: "DtoD"}
"""``ENUM_CUDA_MEMCPY_OPER`` (11 to 13: unified memory's copies) in Kineto's words."""
SYNC_KINDS = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
"""CUPTI's synchronisation types, named as Kineto names its ``cuda_sync`` events."""
_VERSION_SUFFIX = re.compile(r"_v\d{4,}$")
_OPER_NAME = re.compile(r"KIND_(?:UVM_)?([A-Z])TO([A-Z])$")


class NameTable:
    """Every name the export's events carry, interned once for all its ranks."""

    def __init__(self) -> None:
        self._codes: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, name: str) -> int:
        found = self._codes.get(name)
        if found is None:
            found = self._codes[name] = len(self.names)
            self.names.append(name)
        return found

    def codes(self, values: I64, text_of: Callable[[int], str]) -> I64:
        """The code of each value's name: ``text_of`` runs once per distinct value."""
        if not values.size:
            return np.zeros(0, np.int64)
        uniq, inverse = np.unique(values, return_inverse=True)
        table = np.fromiter((self.code(text_of(int(v))) for v in uniq.tolist()), dtype=np.int64, count=uniq.size)
        return table[inverse.reshape(-1)]


def runtime_name(name: str) -> str:
    """A CUDA API function's name without nsys's version suffix (``cudaLaunchKernel_v7000``)."""
    return _VERSION_SUFFIX.sub("", name)


def copy_namer(db: Export) -> Callable[[int, int, int], str]:
    """Kineto's name of a copy from its (copy kind, source memory kind, destination memory kind)."""
    memory, copy = memory_kinds(db), dict(COPY_KINDS)
    if db.has("ENUM_CUDA_MEMCPY_OPER", "id", "name"):
        for oid, enum_name in db.rows("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"):
            match = _OPER_NAME.search(str(enum_name))
            if match and oid is not None:
                copy[int(oid)] = f"{match.group(1)}to{match.group(2)}"

    def named(kind: int, src: int, dst: int) -> str:
        return f"Memcpy {copy.get(kind, 'Unknown')} ({memory.get(src, 'Unknown')} -> {memory.get(dst, 'Unknown')})"

    return named


def memory_kinds(db: Export) -> dict[int, str]:
    kinds = dict(MEMORY_KINDS)
    if db.has("ENUM_CUDA_MEM_KIND", "id", "label"):
        kinds.update((int(i), str(label)) for i, label in db.rows("SELECT id, label FROM ENUM_CUDA_MEM_KIND")
                     if i is not None and label)
    return kinds
