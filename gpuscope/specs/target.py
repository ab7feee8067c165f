"""The MFU a run is held to: ``--target-mfu``, else ``[efficiency] target_mfu`` in config.toml, else the default.

```toml
[efficiency]
target_mfu = 0.5     # the attainable model FLOPs utilisation the cost section prices the gap to (0..1]
```
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuscope.model.efficiency import DEFAULT_TARGET_MFU
from gpuscope.pricing.resolve import CONFIG_NAME, PriceError, home_dir, load_toml
from gpuscope.specs.table import SpecError

__all__ = ["CLI_SOURCE", "DEFAULT_SOURCE", "DEFAULT_TARGET_MFU", "TargetMfu", "check_target", "resolve_target_mfu"]
CLI_SOURCE = "--target-mfu"
DEFAULT_SOURCE = "default: what well-tuned dense training reaches"


@dataclass(frozen=True)
class TargetMfu:
    """The MFU target and where it was set."""

    value: float
    source: str


def check_target(value: float, where: str) -> float:
    """``value`` when it is a fraction in (0, 1]; SpecError (one line naming ``where``) otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        hint = f" (a percentage? {value:g}% is {value / 100:g})" if isinstance(value, int | float) and \
            1 < value <= 100 else ""
        raise SpecError(f"{where} must be a fraction of peak above 0 and at most 1, e.g. 0.4 for 40%, "
                        f"not {value!r}{hint}")
    return float(value)


def resolve_target_mfu(cli_target_mfu: float | None = None, *, home: Path | None = None) -> TargetMfu:
    """The target by precedence: the command line, then config.toml's ``[efficiency] target_mfu``, then
    ``DEFAULT_TARGET_MFU``. A value that is not a fraction in (0, 1] is a SpecError."""
    if cli_target_mfu is not None:
        return TargetMfu(check_target(cli_target_mfu, CLI_SOURCE), CLI_SOURCE)
    path = home_dir(home) / CONFIG_NAME
    try:
        doc = load_toml(path)
    except PriceError as exc:
        raise SpecError(str(exc)) from None
    section = (doc or {}).get("efficiency", {})
    if not isinstance(section, Mapping):
        raise SpecError(f"{path}: [efficiency] must be a table")
    unknown = sorted(set(section) - {"target_mfu"})
    if unknown:
        raise SpecError(f"{path} [efficiency]: unknown setting {unknown[0]!r} (known: target_mfu)")
    if "target_mfu" not in section:
        return TargetMfu(DEFAULT_TARGET_MFU, DEFAULT_SOURCE)
    where = f"{path} [efficiency] target_mfu"
    return TargetMfu(check_target(section["target_mfu"], where), f"config {path} [efficiency]")
