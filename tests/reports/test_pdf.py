"""The PDF report, printed by headless Chromium: its text read back with pypdf, its pages drawn with pdfium."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pypdf
import pypdfium2 as pdfium
import pytest

from gpuscope.cli.report import Pricing, document
from gpuscope.format import usd
from gpuscope.reports.browser import (
    ENV_BROWSER,
    ENV_BROWSER_ALIASES,
    HOW_TO_GET_ONE,
    Browser,
    BrowserError,
    find_browser,
)
from gpuscope.reports.html import render_html, title
from gpuscope.reports.pdf import render_pdf
from gpuscope.store import Store
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.reports.test_html_runs import Runs, chart_titles, invoke, report_json

A4_PT = (595.28, 841.89)
LETTER_PT = (612.0, 792.0)
COLOURED = 60
"""A pixel whose channels differ this much is a chart's colour, not text's grey or the page's white."""


def size(page: pypdf.PageObject) -> tuple[float, float]:
    return float(page.mediabox.width), float(page.mediabox.height)


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def coloured_pixels(image: np.ndarray) -> int:
    rgb = image[..., :3].astype(np.int16)
    return int(((rgb.max(axis=-1) - rgb.min(axis=-1)) > COLOURED).sum())


def chart_pages(pdf_path: Path, titles: list[str]) -> dict[str, int]:
    """Each chart title -> the page it is printed on, after checking the area under it is drawn in colour."""
    doc = pdfium.PdfDocument(pdf_path)
    found: dict[str, int] = {}
    try:
        for index in range(len(doc)):
            page = doc[index]
            text = page.get_textpage()
            image = page.render(scale=1).to_numpy()
            height_pt = page.get_height()
            assert coloured_pixels(image) > 0 or (image < 250).any(), f"page {index + 1} is blank"
            for wanted in titles:
                match = text.search(wanted[:30], match_case=True).get_next()
                if match is None or wanted in found:
                    continue
                top_pt = text.get_charbox(match[0])[3]
                row = max(int(height_pt - top_pt), 0)
                area = image[row: row + 150]
                assert coloured_pixels(area) > 300, f"chart {wanted!r} on page {index + 1} looks blank"
                found[wanted] = index
    finally:
        doc.close()
    return found


@pytest.mark.parametrize("which", ["trace", "8 ranks", "live"])
def test_pdf_holds_the_json_numbers_and_every_chart_as_vectors(runs: Runs, browser: Browser, tmp_path: Path,
                                                               which: str) -> None:
    run_id = runs.ids()[which]
    with Store(runs.home) as store:
        doc = document(store, run_id, Pricing())
    page = render_html(doc)
    out = tmp_path / "report.pdf"
    out.write_bytes(render_pdf(page, browser=browser, paper="a4", footer=title(doc)))
    reader = pypdf.PdfReader(out)
    pages = len(reader.pages)
    assert all(size(p) == pytest.approx(A4_PT, abs=1.0) for p in reader.pages)
    text = flat(" ".join(p.extract_text() for p in reader.pages))
    expected = report_json(runs.home, run_id)
    assert flat(expected["verdict"]["summary"]) in text
    assert f"This run {usd(expected['cost']['total_usd'])}" in text
    # The live run's job does not say which types it uses, so no GPU without its H100's fp8 and FlashAttention 3 is
    # offered; it has nothing else to change.
    assert expected["recommendations"] or which == "live", "each sample trace run has advice"
    for rec in expected["recommendations"]:
        assert rec["title"] in text
    for number in range(1, pages + 1):
        assert f"page {number} of {pages}" in text
    titles = chart_titles(page)
    found = chart_pages(out, titles)
    assert set(found) == set(titles), "every chart is printed"
    for index in set(found.values()):
        assert not reader.pages[index].images, "charts are vector paths and text, not pictures"
    assert found[titles[0]] == 0 and "What to change first" in reader.pages[0].extract_text()


def test_cli_prints_letter_from_the_suffix(runs: Runs, tmp_path: Path) -> None:
    out = tmp_path / "8ranks.pdf"
    invoke(runs.home, "report", runs.ranks8_id, "-o", str(out), "--paper", "letter")
    reader = pypdf.PdfReader(out)
    assert all(size(p) == pytest.approx(LETTER_PT, abs=1.0) for p in reader.pages)
    assert "gpuscope report: dlrm_8rank" in reader.pages[0].extract_text()


def test_without_a_browser_one_line_says_how_to_get_one(runs: Runs, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_BROWSER, *ENV_BROWSER_ALIASES):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "bin"
    empty.mkdir()
    result = gpuscope("report", runs.trace_id, "-f", "pdf", home=runs.home, PATH=str(empty))
    assert result.returncode == 2
    assert one_clean_error_line(result) == f"gpuscope: error: {HOW_TO_GET_ONE}"
    missing = gpuscope("report", runs.trace_id, "-f", "pdf", "--browser", str(empty / "chrome"), home=runs.home)
    assert missing.returncode == 2 and "--browser" in one_clean_error_line(missing)
    not_chromium = gpuscope("report", runs.trace_id, "-f", "pdf", "--browser", "true", home=runs.home)
    assert not_chromium.returncode == 2 and "did not start as a DevTools browser" in one_clean_error_line(not_chromium)
    assert not list(Path.cwd().glob("gpuscope-*.pdf"))


@pytest.mark.parametrize(("args", "says"), [
    (["no-such-run"], "no such trace file or folder"),
    (["{trace}", "--format", "docx"], "--format docx"),
    (["{trace}", "--paper", "a3", "-f", "pdf"], "--paper a3"),
    (["{trace}", "-o", "/no/such/folder/r.html"], "cannot write"),
])
def test_user_errors_are_one_line(runs: Runs, args: list[str], says: str) -> None:
    result = gpuscope("report", *(a.format(trace=runs.trace_id) for a in args), home=runs.home)
    assert result.returncode == 2 and says in one_clean_error_line(result)


def test_a_page_whose_charts_fail_or_never_finish_is_an_error_not_a_hang(browser: Browser, tmp_path: Path) -> None:
    failing, stuck = tmp_path / "failing.html", tmp_path / "stuck.html"
    failing.write_text("<html><script>document.documentElement.dataset.charts = 'error: boom'</script></html>")
    stuck.write_text("<html><body>never ready</body></html>")
    with pytest.raises(BrowserError, match="could not be drawn .error: boom"):
        render_pdf(failing.read_text(), browser=browser, paper="a4", footer="x")
    browser.timeout_s, saved = 0.5, browser.timeout_s
    try:
        with pytest.raises(BrowserError, match="not ready in 0.5 s"):
            render_pdf(stuck.read_text(), browser=browser, paper="a4", footer="x")
    finally:
        browser.timeout_s = saved
    assert render_pdf(failing.read_text().replace("error: boom", "ready"), browser=browser, paper="letter",
                      footer="x").startswith(b"%PDF-"), "the browser is still usable"


def test_the_browser_is_found_as_choreographer_finds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "my-chrome"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    for name in (ENV_BROWSER, *ENV_BROWSER_ALIASES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BrowserError, match="no Chromium found"):
        find_browser()
    (tmp_path / "chromium-browser").symlink_to(fake)
    assert find_browser() == str(tmp_path / "chromium-browser"), "a usual name on PATH"
    monkeypatch.setenv("BROWSER_PATH", str(fake))
    assert find_browser() == str(fake), "choreographer's variable"
    monkeypatch.setenv(ENV_BROWSER, "no-such-chrome")
    with pytest.raises(BrowserError, match=r"\$GPUSCOPE_BROWSER no-such-chrome"):
        find_browser()
    assert find_browser(str(fake)) == str(fake), "--browser comes first"


def _installed(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("platform", "layout"), [
    ("darwin", ["{root}/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
                "{home}/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
                "{root}/Applications/Chromium.app/Contents/MacOS/Chromium",
                "{root}/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge"]),
    ("win32", ["{ProgramFiles}/Google/Chrome/Application/chrome.exe",
               "{ProgramFiles(x86)}/Google/Chrome/Application/chrome.exe",
               "{LocalAppData}/Google/Chrome/Application/chrome.exe",
               "{LocalAppData}/Chromium/Application/chrome.exe",
               "{ProgramFiles(x86)}/Microsoft/Edge/Application/msedge.exe"]),
    ("linux", ["{root}/opt/google/chrome/chrome", "{root}/snap/bin/chromium",
               "{root}/opt/chromium.org/chromium/chromium"]),
])
def test_standard_install_places_are_found_off_path(tmp_path: Path, platform: str, layout: list[str]) -> None:
    """A fake filesystem per platform (the machine's own / and PATH are not looked at): each standard place alone is
    found; the first in the list wins when several are there; nothing there is the one-line error."""
    dirs = {"root": tmp_path / "root", "home": tmp_path / "home", "ProgramFiles": tmp_path / "Program Files",
            "ProgramFiles(x86)": tmp_path / "Program Files (x86)", "LocalAppData": tmp_path / "AppData" / "Local"}
    env = {"PATH": str(tmp_path / "empty-bin"), **{k: str(v) for k, v in dirs.items() if k[0] in "PL"}}

    def found() -> str:
        return find_browser(env=env, platform=platform, root=dirs["root"], home=dirs["home"])

    with pytest.raises(BrowserError, match="no Chromium found"):
        found()
    places = [Path(p.format(**{k: str(v) for k, v in dirs.items()})) for p in layout]
    for place in places:
        _installed(place)
        assert found() == str(place)
        place.unlink()
    for place in places:
        _installed(place)
    assert found() == str(places[0])
    places[0].chmod(0o644)  # not executable: not a browser to start
    assert found() == str(places[1])
    assert find_browser(env={**env, ENV_BROWSER: str(places[1])}, platform=platform, root=dirs["root"],
                        home=dirs["home"]) == str(places[1]), "the variable overrides"
    (tmp_path / "empty-bin").mkdir()
    on_path = _installed(tmp_path / "empty-bin" / "chromium")
    assert found() == str(on_path), "PATH comes before the install places"
