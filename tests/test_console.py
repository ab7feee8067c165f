"""The console the command prints through: strings stay text at every nesting level, whoever wrote them."""

from __future__ import annotations

import io
import logging

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Group
from rich.panel import Panel
from rich.style import Style
from rich.table import Table
from rich.text import Text

from gpuscope.console import PrintableLog, SafeConsole
from tests.payloads import ANSI, ANSI_SHOWN, RICH, SGR, controls

IN_TEXT = ANSI_SHOWN.replace(r"\x07", "").replace(r"\x08", "")
"""``ANSI`` made into rich Text: rich drops bell and backspace itself (and CR, VT, FF), the rest is escaped."""


def printed(*renderables: object, width: int = 300) -> str:
    out = io.StringIO()
    console = SafeConsole(file=out, width=width, force_terminal=True, color_system="truecolor")
    for r in renderables:
        console.print(r)
    return out.getvalue()


def test_markup_and_emoji_codes_in_strings_print_as_typed() -> None:
    table = Table("name", title=RICH)
    table.add_row(RICH)
    text = printed(RICH, table, Panel("body", title=Text(RICH)))
    assert text.count(RICH) == 4, text
    assert "\x1b]8;" not in text and "💀" not in text
    out = io.StringIO()
    SafeConsole(file=out, width=300).print(RICH, markup=True, emoji=True)  # asking does not turn it on
    assert out.getvalue() == RICH + "\n"


def test_control_characters_become_escapes_inside_panels_and_tables_and_keep_the_frame() -> None:
    table = Table("kernel", "share")
    table.add_row(ANSI, "12%")
    text = printed(Panel(Group(Text(f"top kernel: {ANSI}", style="dim"), table), title=Text(f"GPU {ANSI}")),
                   width=400)
    assert controls(text.encode()) == []
    assert text.count(IN_TEXT) == 2  # the line and the title; the table folds the cell across lines
    # The escapes were measured before the layout: every line of the panel is as wide as its border.
    widths = {cell_len(line) for line in SGR.sub(b"", text.encode()).decode().splitlines()}
    assert widths == {400}, widths


def test_gpuscopes_own_styles_still_colour_and_no_hyperlink_is_written() -> None:
    text = printed(Text("FAIL", style="bold red"), Text("x", style=Style(link="https://evil.example/")))
    assert "\x1b[1;31mFAIL" in text
    assert "\x1b]8" not in text and "evil.example" not in text


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_whatever_the_text_the_terminal_gets_only_colours(text: str) -> None:
    table = Table("a", "b")
    table.add_row(text, Text(text, style="bold"))
    output = printed(text, Text(text), Panel(table, title=Text(text)), width=120)
    assert controls(output.encode("utf-8", "surrogateescape")) == []


def test_a_log_record_quoting_a_client_is_printable_line_by_line() -> None:
    out = io.StringIO()
    logger = logging.getLogger("gpuscope.test.printable")
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    logger.addFilter(PrintableLog())
    try:
        try:
            raise ValueError(ANSI)
        except ValueError:
            logger.exception("Exception on /runs/%s [GET]", ANSI)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert lines[0] == f"Exception on /runs/{ANSI_SHOWN} [GET]"
    assert lines[1] == "Traceback (most recent call last):" and lines[-1] == f"ValueError: {ANSI_SHOWN}"
    assert controls(out.getvalue().encode()) == []
