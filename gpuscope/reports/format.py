"""The reports' formatting is gpuscope.format's, the one every view uses."""

from gpuscope.format import evidence_item, evidence_value, gib, ms, num, pct, rate, usd

__all__ = ["evidence_item", "evidence_value", "gib", "ms", "num", "pct", "rate", "usd"]
