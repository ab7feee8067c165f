"""The one kind of rich Console gpuscope prints through: strings in it stay text, whoever wrote them.

Kernel, GPU, thread, pod and run names, command lines and stack frames come from traces, labels and processes
that someone else controls. rich would read ``[link=...]`` or ``[bold]`` in a string as markup and pass ESC, CSI
and OSC sequences through to the terminal (retitle the window, clear the screen, forge output). A ``SafeConsole``
reads no markup or emoji codes in strings, shows every control character of every text it lays out as a visible
escape (``format.printable``; a newline stays a line break, which rich draws inside its frames), and emits no
hyperlink. The styles gpuscope itself gives its text still colour it. The command line prints through two of them.

The views do their part too, for a console a caller hands them: they make every string of what they show
``printable`` first (``format.printable_all``; a newline in a kernel name reads ``\\x0a`` instead of starting a
line) and put names in as ``Text``, never as a markup string.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, HighlighterType, JustifyMethod, OverflowMethod, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text

from gpuscope.format import printable, without_credentials

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                      "\ud800-\udfff\ufffe\uffff]")
"""``format.printable``'s characters but the newline, which rich's own layout uses between lines."""


class SafeConsole(Console):
    """A rich Console that shows any string as the characters it holds (see the module's docstring).

    Markup, emoji codes and highlighting are off for every string, even when a call asks for them; use ``Text``
    with a style for what gpuscope styles itself."""

    def __init__(self, **options: Any) -> None:
        options.update(markup=False, emoji=False, highlight=False)
        super().__init__(**options)

    def render_str(self, text: str, *, style: str | Style = "", justify: JustifyMethod | None = None,
                   overflow: OverflowMethod | None = None, emoji: bool | None = None, markup: bool | None = None,
                   highlight: bool | None = None, highlighter: HighlighterType | None = None) -> Text:
        return super().render_str(text, style=style, justify=justify, overflow=overflow, emoji=False,
                                  markup=False, highlight=False, highlighter=highlighter)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        # Every Text of every nesting level passes here before rich lays it out (panels, tables and groups
        # render their children through this method), so escapes are measured as the characters they are.
        if isinstance(renderable, Text):
            renderable = printable_text(renderable)
        for segment in super().render(renderable, options):
            yield segment if segment.control else _printable_segment(segment)


def printable_text(text: Text) -> Text:
    """``text`` with its control characters shown as escapes, each escape inside the styles of what it replaces."""
    plain = text.plain
    if not _CONTROL.search(plain):
        return text
    moved = [0] * (len(plain) + 1)  # where each offset of ``plain`` lands in the escaped text
    parts = []
    for i, char in enumerate(plain):
        parts.append(printable(char) if _CONTROL.match(char) else char)
        moved[i + 1] = moved[i] + len(parts[-1])
    out = text.blank_copy("".join(parts))
    out.spans = [Span(moved[min(s.start, len(plain))], moved[min(s.end, len(plain))], s.style) for s in text.spans]
    return out


def _printable_segment(segment: Segment) -> Segment:
    """Last guard before the terminal: no control character in text, no hyperlink (gpuscope makes none)."""
    text, style = segment.text, segment.style
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: printable(m.group()), text)
    if style is not None and style.link:
        style = style.update_link(None)
    return Segment(text, style) if (text, style) != (segment.text, segment.style) else segment


class PrintableLog(logging.Filter):
    """Makes a log record's message and traceback printable, line by line, and masks the secrets in them: a
    server's log line can quote what a client sent (a request's path and its ``?token=``, a callback's arguments),
    and it goes to the terminal that runs the server."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = _printable_lines(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = _printable_lines(logging.Formatter().formatException(record.exc_info))
        return True


def _printable_lines(text: str) -> str:
    return "\n".join(printable(without_credentials(line)) for line in text.split("\n"))

