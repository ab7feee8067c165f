"""A device name (as NVML, ROCm, a trace's deviceProperties or a user spell it) to the one table entry it stands
for: the rule the GPU spec table and the price catalog both match by.

A name stands for an entry when it is the entry's own name, or when one of the entry's patterns (regular
expressions over the normalized name) matches it. Each entry's patterns say what sets it apart from its siblings
("NVIDIA H100 PCIe" is the PCIe card, "NVIDIA H100 80GB HBM3" the SXM one), so a name that two entries' patterns
match, or that names a family ("H100", "NVIDIA H100", "A100") but no member of it, stands for more than one model:
it is ambiguous, and the caller refuses it with the choices, never picks one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
_VENDOR_WORDS = frozenset({"nvidia", "tesla", "amd", "instinct", "radeon"})


def normalize(name: str) -> str:
    """Lower-case a device name, split on '-', '_' and '/', and drop vendor words.

    "NVIDIA A100-SXM4-80GB" -> "a100 sxm4 80gb"; "Tesla V100-DGXS-32GB" -> "v100 dgxs 32gb".
    """
    words = re.split(r"[\s\-_/]+", name.strip().lower())
    return " ".join(w for w in words if w and w not in _VENDOR_WORDS)


def family(model: str) -> str:
    """The first word of a model's normalized name: "H100 SXM" -> "h100", "A100 PCIe 80GB" -> "a100"."""
    words = normalize(model).split()
    return words[0] if words else ""


@dataclass(frozen=True)
class NameMatch(Generic[T]):
    """What a name stands for: one entry (``found``), several (``choices``, their model names: ambiguous), or
    none."""

    found: T | None
    choices: tuple[str, ...] = ()

    @property
    def ambiguous(self) -> bool:
        return len(self.choices) > 1

    def choices_text(self) -> str:
        """"H100 SXM, H100 NVL or H100 PCIe"."""
        if len(self.choices) < 2:
            return ", ".join(self.choices)
        return ", ".join(self.choices[:-1]) + " or " + self.choices[-1]


def match_name(name: str | None, entries: Sequence[T], model_of: Callable[[T], str],
               patterns_of: Callable[[T], Sequence[str]]) -> NameMatch[T]:
    """The entry ``name`` stands for: its own name first; then the entries whose patterns match (one: it; more:
    ambiguous); then, where none matches, the entries of the family the name names (more than one: ambiguous).
    Patterns are compiled once per call; tables are a few dozen entries."""
    if not name or not name.strip():
        return NameMatch(None)
    key = normalize(name)
    own = [e for e in entries if normalize(model_of(e)) == key]
    if own:
        return NameMatch(own[0])
    hits = [e for e in entries if any(re.search(p, key) for p in patterns_of(e))]
    if len(hits) == 1:
        return NameMatch(hits[0])
    if hits:
        return NameMatch(None, _unique(model_of(e) for e in hits))
    words = set(key.split())
    kin = [e for e in entries if family(model_of(e)) in words]
    if len(kin) > 1:
        return NameMatch(None, _unique(model_of(e) for e in kin))
    return NameMatch(None)


def _unique(models: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(models))
