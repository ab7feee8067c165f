"""Prometheus exposition text, read leniently and within bounds: the lines of the metrics a scrape wants picked by
name before anything is parsed (a scrape of 300,000 series of which a reader wants twenty costs a pass of the
regular-expression engine, not 300,000 parsed samples), those lines parsed by prometheus_client's parser, a line it
rejects skipped and counted, and text none of whose lines parse told apart (``NotExposition``). What the
dcgm-exporter and serving-metrics scrapes both read their answers with."""

from __future__ import annotations

import functools
import io
import itertools
import math
import re
from collections.abc import Collection, Iterator

from prometheus_client.parser import text_string_to_metric_families

PARSER_ERRORS = (ValueError, OverflowError)
"""What prometheus_client's parser raises on a line it cannot read: ValueError, or OverflowError for a timestamp
past any double (it divides the integer it read by 1000)."""
PROBE_LINES = 100
"""Lines tried by the parser to tell text that is not Prometheus' at all from a scrape without the metrics wanted."""

Sample = tuple[str, dict[str, str], float]
_PREFIX_CHARS = 4
"""How much of each wanted name the scan for lines matches on before a line is looked at whole."""


class NotExposition(ValueError):
    """None of the lines is a Prometheus sample."""


def samples(lines: list[str]) -> list[Sample]:
    """(name, labels, value) of the given sample lines (comments and blank lines left out by the caller); a line
    the parser rejects is skipped; ``NotExposition`` when none parses. A value is the parser's: an integer written
    without a point stays an ``int``, which may be too large for a float (``as_float``)."""
    found, rejected = read(lines)
    if rejected and not found:
        raise NotExposition("not Prometheus text (no line could be parsed)")
    return found


def read(lines: list[str]) -> tuple[list[Sample], int]:
    """(name, labels, value) of the sample lines the parser reads, and how many it rejected."""
    if not lines:
        return [], 0
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
        rejected = 0
    except PARSER_ERRORS:
        families, rejected = [], 0
        for line in lines:
            try:
                families.extend(text_string_to_metric_families(line + "\n"))
            except PARSER_ERRORS:
                rejected += 1
    return [(s.name, dict(s.labels), s.value) for family in families for s in family.samples], rejected


def named_lines(text: str, names: Collection[str]) -> Iterator[tuple[str, str]]:
    """(name, line) of every sample line of ``text`` whose metric is one of ``names``, in order, found as they are
    asked for (a reader may stop early); the rest of the text is never split into lines, nor copied. The
    regular-expression engine finds the lines that start like one of the names (a newline, then a few known
    letters: a fast scan), and only those are looked at one by one."""
    wanted = frozenset(names)
    first, rest = _patterns(wanted)
    head = first.match(text)
    for match in itertools.chain([head] if head is not None else [], rest.finditer(text)):
        if match.group(1) in wanted:
            yield match.group(1), (match.group(1) + match.group(2)).rstrip()


@functools.lru_cache(maxsize=8)
def _patterns(names: frozenset[str]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The first line's pattern, and every later line's (it starts with the newline before it)."""
    starts = "|".join(sorted({re.escape(n[:_PREFIX_CHARS]) for n in names}))
    line = rf"[ \t]*((?:{starts})[^\s{{]*)([^\n]*)"
    return re.compile(line), re.compile(r"\n" + line)


def check_exposition(text: str) -> None:
    """``NotExposition`` unless one of the first sample lines of ``text`` parses (a page of something else is told
    from its first ``PROBE_LINES`` lines, not parsed whole)."""
    lines = (line for line in io.StringIO(text) if line.strip() and not line.lstrip().startswith("#"))
    for line in itertools.islice(lines, PROBE_LINES):
        try:
            list(text_string_to_metric_families(line.rstrip("\r\n") + "\n"))
            return
        except PARSER_ERRORS:
            continue
    raise NotExposition("not Prometheus text (no line could be parsed)")


def as_float(value: float) -> float:
    """``value`` as a float; an integer past the largest float is infinite (as a float that large reads)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
