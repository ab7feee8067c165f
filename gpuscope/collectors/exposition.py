"""Prometheus exposition text, read leniently: the samples of the lines prometheus_client's parser reads, a line
it rejects skipped, and text none of whose lines parse told apart (``NotExposition``). What the dcgm-exporter and
serving-metrics scrapes both read their answers with."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

PARSER_ERRORS = (ValueError, OverflowError)
"""What prometheus_client's parser raises on a line it cannot read: ValueError, or OverflowError for a timestamp
past any double (it divides the integer it read by 1000)."""


class NotExposition(ValueError):
    """None of the lines is a Prometheus sample."""


def samples(lines: list[str]) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of the given sample lines (comments and blank lines left out by the caller); a line
    the parser rejects is skipped; ``NotExposition`` when none parses. A value is the parser's: an integer written
    without a point stays an ``int``, which may be too large for a float (``as_float``)."""
    if not lines:
        return []
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except PARSER_ERRORS:
        families = []
        for line in lines:
            try:
                families.extend(text_string_to_metric_families(line + "\n"))
            except PARSER_ERRORS:
                continue
        if not families:
            raise NotExposition("not Prometheus text (no line could be parsed)") from None
    return [(s.name, dict(s.labels), s.value) for family in families for s in family.samples]


def as_float(value: float) -> float:
    """``value`` as a float; an integer past the largest float is infinite (as a float that large reads)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
