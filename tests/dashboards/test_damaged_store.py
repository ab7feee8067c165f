"""The dashboard over a damaged store, served for real on loopback: every page answers (no HTTP 500), says what
could not be read in one line naming the file, and shows every run that can be read."""

from __future__ import annotations

import http.client
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuscope.store import Store
from tests.conftest import load_benchmark
from tests.dashboards.serving import dashboard
from tests.dashboards.test_cli import CLI, _free_port
from tests.store import damage
from tests.store.damage import DAMAGE, db_file, synthetic_id

browser = load_benchmark("bench_dashboard_load")  # what dash-renderer posts for each page


def _report_row(home: Path) -> None:
    damage.execute(home, "UPDATE reports SET report = x'7b7b' WHERE run_id = ?", synthetic_id(3))


def _catalog_row(home: Path) -> None:
    damage.execute(home, "UPDATE runs SET command = '[1, 2' WHERE id = ?", synthetic_id(4))


def _block(home: Path) -> None:
    damage.execute(home, "UPDATE sample_blocks SET names = '{\"sources\": 3}' WHERE run_id = ?", synthetic_id(5))


def _trace(home: Path) -> None:
    for npz in (home / "runs").glob("*/rank*.npz"):
        npz.write_bytes(b"PK\x03\x04 not a zip")


ROWS: dict[str, Callable[[Path], None]] = {"a report row": _report_row, "a catalog row": _catalog_row,
                                           "a block of samples": _block, "a saved trace": _trace}
READABLE = sorted({*DAMAGE} - {"emptied", "header overwritten", "cut after its header", "database deleted"})


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    home = tmp_path_factory.mktemp("base") / "home"
    return home, damage.build(home)


def ask(port: int, body: dict[str, Any] | None = None) -> str:
    """One request (a page load, or a callback when ``body``), which must be answered with 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        if body is None:
            conn.request("GET", "/")
        else:
            conn.request("POST", "/_dash-update-component", body=json.dumps(body).encode(),
                         headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read().decode()
        assert response.status == 200, (body, text[:500])
        return text if body is None else json.dumps(json.loads(text))  # Dash writes "/" as \u002f
    finally:
        conn.close()


def every_page(port: int, run_ids: list[str]) -> list[str]:
    """All the dashboard's pages and refreshes for these runs; the answers, the runs list's first."""
    ask(port)
    answers = [ask(port, browser.router("/")), ask(port, browser.runs_tick())]
    for run_id in run_ids:
        answers += [ask(port, body) for body in (browser.router(f"/runs/{run_id}"), browser.run_charts(run_id),
                                                 browser.run_tick(run_id))]
    answers.append(ask(port, browser.router("/compare", f"?a={run_ids[0]}&b={run_ids[-1]}")))
    return answers


def samples_unreadable(home: Path) -> list[str]:
    """The runs whose samples a plain SQLite reader cannot get (the reference for a damaged samples page)."""
    db = sqlite3.connect(f"file:{db_file(home)}?mode=ro", uri=True)
    lost = []
    for run_id in (synthetic_id(i) for i in range(damage.SYNTHETIC)):
        try:
            db.execute("SELECT data FROM sample_blocks WHERE run_id = ?", (run_id,)).fetchall()
        except sqlite3.DatabaseError:
            lost.append(run_id)
    db.close()
    return lost


def listed(answer: str) -> set[str]:
    """The runs in the runs list's table."""
    def tables(node: Any) -> Iterator[Any]:
        if isinstance(node, dict):
            if node.get("props", {}).get("id") == "runs-table":
                yield node["props"]["rowData"]
            for value in node.values():
                yield from tables(value)
        elif isinstance(node, list):
            for value in node:
                yield from tables(value)

    (data,) = tables(json.loads(answer))
    return {row["id"] for row in data}


@pytest.mark.parametrize("kind", READABLE + sorted(ROWS))
def test_every_page_answers_over_a_damaged_store(kind: str, base: tuple[Path, str], tmp_path: Path) -> None:
    home, trace_id = damage.copy(base[0], tmp_path / "home"), base[1]
    (DAMAGE | ROWS)[kind](home)
    runs = [trace_id, *(synthetic_id(i) for i in (3, 4, 5, 59)), *samples_unreadable(home)[:1]]
    with Store(home) as store, dashboard(store) as port:
        answers = every_page(port, runs)
    problems = [a for a in answers if "warning: " in a and str(db_file(home)) in a]  # the one line, naming the file
    assert bool(problems) == (kind != "a saved trace"), kind  # the dashboard shows saved reports, not traces
    answer = answers[0]
    expected = damage.readable_ids(home) if kind in ("cut in half", "a catalog page", "the catalog's root page") \
        else {trace_id, *(synthetic_id(i) for i in range(damage.SYNTHETIC))} - (
            {synthetic_id(4)} if kind == "a catalog row" else set())
    assert listed(answer) == expected


def test_damage_found_while_serving(base: tuple[Path, str], tmp_path: Path) -> None:
    home, trace_id = damage.copy(base[0], tmp_path / "home"), base[1]
    runs = [trace_id, synthetic_id(0), synthetic_id(59)]
    with Store(home) as store, dashboard(store) as port:
        assert not any("warning: " in a for a in every_page(port, runs))
        DAMAGE["a samples page"](home)
        DAMAGE["a report page"](home)
        answers = every_page(port, runs + samples_unreadable(home)[:1] + [synthetic_id(i) for i in range(1, 59, 7)])
    assert any("is damaged" in a and str(db_file(home)) in a for a in answers)


@pytest.mark.parametrize("kind", ["emptied", "header overwritten", "cut after its header", "database deleted"])
def test_the_dashboard_refuses_a_store_it_cannot_read(kind: str, base: tuple[Path, str], tmp_path: Path) -> None:
    home = damage.copy(base[0], tmp_path / "home")
    DAMAGE[kind](home)
    done = subprocess.run([*CLI, "--port", str(_free_port())], env={**os.environ, "GPUSCOPE_HOME": str(home)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert str(home) in line and ("restore it from a backup" in line)
