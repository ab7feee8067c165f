"""The report as PDF: the HTML report printed by headless Chromium (``Page.printToPDF``).

Why this path: the HTML report already holds every chart as plotly SVG, and Chromium's print
keeps SVG as vector paths and text, so the PDF's charts are vectors and its text is searchable,
with nothing drawn twice. The DevTools command (rather than ``--print-to-pdf``) lets the page be laid
out at the paper's width with print styles before plotly measures it, waits until every chart is
drawn instead of for a fixed delay, and puts page numbers in a footer template.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Final, Literal

from gpuscope.reports.browser import Browser
from gpuscope.reports.html_blocks import html

Paper = Literal["a4", "letter"]
PAPER_IN: Final[dict[str, tuple[float, float]]] = {"a4": (210 / 25.4, 297 / 25.4), "letter": (8.5, 11.0)}
"""Width and height in inches."""
MARGIN_IN: Final = {"top": 0.55, "bottom": 0.63, "left": 0.47, "right": 0.47}
"""The same margins as the print CSS (14, 16 and 12 mm), so a browser's own print matches."""
CSS_PX_PER_IN = 96


def print_width_px(paper: Paper) -> int:
    """The printable width in CSS pixels: the width the page is laid out at, so charts fit it exactly."""
    return int((PAPER_IN[paper][0] - MARGIN_IN["left"] - MARGIN_IN["right"]) * CSS_PX_PER_IN)


def print_options(paper: Paper, *, footer: str) -> dict[str, Any]:
    """Page.printToPDF's parameters: paper, margins, backgrounds, and a footer with page X of Y."""
    width, height = PAPER_IN[paper]
    template = str(html('<div style="font-family: sans-serif; font-size: 8px; color: #5b6270; width: 100%; '
                        'margin: 0 12mm; display: flex; justify-content: space-between;">'
                        '<span>{}</span><span>page <span class="pageNumber"></span> of '
                        '<span class="totalPages"></span></span></div>', footer))
    return {"paperWidth": width, "paperHeight": height, "marginTop": MARGIN_IN["top"],
            "marginBottom": MARGIN_IN["bottom"], "marginLeft": MARGIN_IN["left"], "marginRight": MARGIN_IN["right"],
            "printBackground": True, "displayHeaderFooter": True, "headerTemplate": "<div></div>",
            "footerTemplate": template, "preferCSSPageSize": False}


def print_file(browser: Browser, html_path: Path, *, paper: Paper, footer: str) -> bytes:
    """One HTML file printed to PDF bytes in a fresh tab of ``browser``."""
    page = browser.page()
    try:
        page.open(html_path, width_px=print_width_px(paper), print_media=True)
        return page.print_pdf(print_options(paper, footer=footer))
    finally:
        page.close()


def render_pdf(html_text: str, *, browser: Browser, paper: Paper, footer: str) -> bytes:
    """An HTML document (a string) printed to PDF bytes."""
    with tempfile.TemporaryDirectory(prefix="gpuscope-report-") as folder:
        path = Path(folder) / "report.html"
        path.write_text(html_text, encoding="utf-8")
        return print_file(browser, path, paper=paper, footer=footer)
