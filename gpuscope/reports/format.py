"""How numbers read in every human-facing view: n/a for unknown, percent only when printed."""

from __future__ import annotations


def pct(share: float | None, digits: int = 1) -> str:
    return "n/a" if share is None else f"{share * 100:.{digits}f}%"


def ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def usd(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}" if abs(value) >= 0.01 else f"${value:.4f}"


def gib(nbytes: int | float | None) -> str:
    return "n/a" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def num(value: float | int | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{digits}f}{unit}"


def evidence_value(key: str, value: float | int | str | None) -> str:
    """Render an evidence entry by the unit its name carries."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if key.endswith(("_share", "_fraction", "_util", "_ratio", "busy", "overlap", "confidence")):
        return pct(float(value))
    if key.endswith("_us"):
        return ms(float(value))
    if key.endswith("_bytes"):
        return gib(value)
    if key.endswith("_usd"):
        return usd(float(value))
    return num(value, digits=2)
