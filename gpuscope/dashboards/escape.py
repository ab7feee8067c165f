"""The one place every string the dashboard sends leaves through ``format.printable``.

The pages make their names printable where they read them (``format.printable_all`` at a page's entry, every
table's cells through ``grid.cells``); this is the guarantee behind them: every JSON answer of the server (Dash's
layout, every callback's output: pages, refreshes, tables, figures) has each string in it, keys included, made
printable before it is sent. A page that forgot its own call, or one added later, still shows a control character
or a bidi override as its escape (``\\x1b``, ``\\u202e``), never the character. Printable text is left as it is
(``printable`` of printable text is itself), so an answer without such a character is sent untouched.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Flask, Response
from plotly.io.json import to_json_plotly

from gpuscope.format import printable


def printable_json(value: Any) -> Any:
    """``value`` (decoded JSON) with every string and key made printable; the same object where none changes."""
    if isinstance(value, str):
        return value if value.isprintable() else printable(value)
    if isinstance(value, list):
        items = [printable_json(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        pairs = {printable_json(k): printable_json(v) for k, v in value.items()}
        same = len(pairs) == len(value) and all(k in value and value[k] is v for k, v in pairs.items())
        return value if same else pairs
    return value


def install(server: Flask) -> None:
    """Make every JSON answer of ``server`` printable on its way out."""

    @server.after_request
    def _printable(response: Response) -> Response:
        if response.mimetype != "application/json" or response.is_streamed:
            return response
        body = response.get_data()
        if b"\\" not in body and body.isascii() and b"\x7f" not in body:
            return response  # printable ASCII without an escape sequence: nothing to escape
        try:
            decoded = json.loads(body)
        except ValueError:  # not JSON after all: no page reads it
            return response
        shown = printable_json(decoded)
        if shown is not decoded:
            response.set_data(to_json_plotly(shown))
        return response
