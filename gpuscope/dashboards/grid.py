"""Every table of the dashboard: one AG Grid builder (dash-ag-grid), so each table sorts, filters, formats its
numbers and shows "n/a" the same way, and every cell it shows has gone through ``format.printable``.

AG Grid shows a cell's value as text unless a column names a cell renderer; the only one used is dash-ag-grid's
Markdown renderer, for the runs list's links, whose text is ``format.markdown_text`` (every Markdown and HTML
character escaped, raw HTML off). A column definition's ``{"function": ...}`` string is code the browser evaluates
(dash-ag-grid parses it, it is never ``eval``-ed): only the constant expressions of this module go there, built from
a d3-format specifier that ``SPECIFIER`` admits (no quote, no bracket, nothing a name could carry), never from data.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dash.development.base_component import Component
from dash_ag_grid import AgGrid

from gpuscope.format import printable

NA = "n/a"
WORD = re.compile(r"[a-z_]+")
"""What a column's ``emphasis`` may be: a constant word of ours (it goes into an expression the browser evaluates)."""
SPECIFIER = re.compile(r"\$?,?\.\d~?[fd]|,?d")
"""The d3-format specifiers a number column may use: fixed digits (``.3f``, with ``$`` and thousands' commas for
money, ``~`` to trim trailing zeros) or whole numbers (``d``)."""
FIXED_3 = ".3f"
WHOLE = "d"
MONEY = "$,.4~f"
"""Up to 4 decimals with trailing zeros trimmed: a $0.0012 trace run must not read "$0.00"."""
TRIMMED_3 = ".3~f"


@dataclass(frozen=True)
class Column:
    """One column: the row key it shows, its header, and whether it holds text or numbers (a d3-format
    ``specifier`` for numbers; None prints n/a)."""

    field: str
    header: str
    kind: Literal["text", "number", "link"] = "text"
    specifier: str = FIXED_3
    """For a number column: how its values print (one of ``SPECIFIER``'s shapes)."""
    sort: Literal["asc", "desc"] | None = None
    """The order the table opens in (one column's); a click on any header sorts by it."""
    emphasis: str | None = None
    """A text column's value (a constant word) whose cells are shown in green bold: a running run's status."""


def number_format(specifier: str) -> dict[str, str]:
    """The value formatter of a number column: the number through d3-format, an unknown value as n/a."""
    if not SPECIFIER.fullmatch(specifier):
        raise ValueError(f"not a number format a table column may use: {specifier!r}")
    return {"function": f"params.value == null ? '{NA}' : d3.format('{specifier}')(params.value)"}


def emphasized(word: str) -> dict[str, Any]:
    """The style of a column whose cells equal ``word`` (a constant of ours) are green and bold."""
    if not WORD.fullmatch(word):
        raise ValueError(f"not a word a table column may emphasize: {word!r}")
    return {"styleConditions": [{"condition": f"params.value === '{word}'",
                                 "style": {"color": "#1a7f37", "fontWeight": "600"}}]}


def cells(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows as a table shows them: every key and string made printable (control characters and bidi overrides read
    as escapes), a number that is not finite unknown (None, shown n/a). What a table's rows go through, on its first
    drawing and on every refresh."""
    return [{printable(k): _cell(v) for k, v in row.items()} for row in rows]


def _cell(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):  # numpy's too: JSON gets a plain int
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    return printable(value)  # anything else a row might hold is shown as its text


def column_defs(columns: Sequence[Column], *, filters: bool) -> list[dict[str, Any]]:
    """AG Grid's column definitions: numbers right-aligned with their format and a number filter; text wraps."""
    defs: list[dict[str, Any]] = []
    for c in columns:
        col: dict[str, Any] = {"field": printable(c.field), "headerName": printable(c.header)}
        if c.sort is not None:
            col["sort"] = c.sort
        if c.kind == "number":
            col |= {"type": "rightAligned", "cellDataType": "number", "valueFormatter": number_format(c.specifier),
                    "filter": "agNumberColumnFilter" if filters else False}
        else:
            col |= {"cellDataType": "text", "filter": "agTextColumnFilter" if filters else False,
                    "wrapText": True, "autoHeight": True, "maxWidth": 420}
            if c.kind == "link":
                col["cellRenderer"] = "markdown"
            if c.emphasis is not None:
                col["cellStyle"] = emphasized(c.emphasis)
        defs.append(col)
    return defs


def table(table_id: str, columns: Sequence[Column], rows: Sequence[Mapping[str, Any]], *, filters: bool = True,
          page_size: int = 25, **options: Any) -> Component:
    """A table that sorts (click a header) and, with ``filters``, filters (the row under the headers); ``page_size``
    rows a page. A text column's missing value reads n/a. ``options`` are AG Grid's own (``getRowId``,
    ``dashGridOptions`` entries are merged)."""
    text = [c.field for c in columns if c.kind != "number"]
    shown = [{**row, **{k: NA for k in text if row.get(k) is None}} for row in rows]
    grid_options = {"pagination": True, "paginationPageSize": page_size,
                    "paginationPageSizeSelector": sorted({page_size, 25, 50, 100}), "domLayout": "autoHeight",
                    "suppressColumnVirtualisation": True, "suppressFieldDotNotation": True,
                    "enableCellTextSelection": True, **options.pop("dashGridOptions", {})}
    made: Component = AgGrid(id=table_id, columnDefs=column_defs(columns, filters=filters), rowData=cells(shown),
                             defaultColDef={"sortable": True, "resizable": True, "floatingFilter": filters,
                                            "suppressHeaderMenuButton": True},
                             dashGridOptions=grid_options, columnSize="autoSize", className="table",
                             style={"height": None, "width": "100%"}, **options)
    return made


def dict_table(table_id: str, rows: Sequence[Mapping[str, Any]], *, filters: bool = True) -> Component:
    """A table of rows whose keys are their headers (the fleet's and serving's, already worded by ``format``): a
    column of numbers only is a number column, the rest text."""
    keys = list(rows[0]) if rows else []
    columns = [Column(k, k, "number" if _numbers(r.get(k) for r in rows) else "text", TRIMMED_3) for k in keys]
    return table(table_id, columns, rows, filters=filters)


def _numbers(values: Any) -> bool:
    seen = [v for v in values if v is not None]
    return bool(seen) and all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in seen)
