"""Every route of the dashboard over a store whose every name is hostile, asked as the browser asks (Flask's test
client, no browser): the page, then every callback the page's components can fire. In no answer is there a raw
control character, bidi override or other character ``str.isprintable`` refuses (the names read as their escapes,
as in every view); drawing them raises no deprecation warning; and the only code strings the tables carry (AG
Grid's ``{"function": ...}`` and conditions) are the constant shapes of ``gpuscope.dashboards.grid``."""

from __future__ import annotations

import json
import re
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from flask import Flask, Response
from flask.testing import FlaskClient
from plotly.io.json import to_json_plotly
from typer.testing import CliRunner

from gpuscope.cli.main import app as cli
from gpuscope.dashboards import create_app, escape, grid
from gpuscope.fleet import analyze_fleet
from gpuscope.fleet.saved import save_fleet_run
from gpuscope.model.fleet import UTIL
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.run import RunMeta
from gpuscope.model.serving import ServingMetrics, ServingPod
from gpuscope.store import Store
from tests import builders as b
from tests import memory_builders as mb
from tests.figures.fixtures import STACKS, sample_rows, stack_rows
from tests.fleet.test_analysis import fleet, price
from tests.payloads import ANSI, hostile_report, payload

NAME = f"{payload()} line\nbreak\u2028sep zero\u200bwidth no\u00a0break"
"""Every payload (ESC, BEL, C1 CSI, DEL, backspace, the bidi override U+202E...), a line feed, a line separator, a
zero-width space and a no-break space."""
ESCAPED = r"\x1b]0;pwned title\x07"
"""How the start of ``NAME``'s escape sequences reads on a page: each page showing a name must hold it."""
RECORDED = "20261203-120000-ddeeff"
CODE = re.compile(r"params\.value == null \? 'n/a' : d3\.format\('[$,.0-9~df]+'\)\(params\.value\)"
                  r"|params\.value === '[a-z_]+'|params\.data\.id")
"""The only expressions a table may hand the browser: a number's format, a constant word's emphasis, the row id."""


@dataclass(frozen=True)
class Site:
    client: FlaskClient
    urls: tuple[str, ...]
    """Every page: the menu's, each run's own pages (report, operators, memory), the fleet regrouped, compare."""
    downloads: tuple[str, ...]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("every-route")
    home = folder / "home"
    steps = b.trace([*(e for n in (1, 2) for e in (  # operator, kernel and GPU names; memory events
        b.step(n, n * 1000, 1000), b.cpu_op(NAME, n * 1000 + 10, 500), b.launch(n * 1000 + 20, 5, n),
        b.kernel(NAME, n * 1000 + 30, 400, n), b.memory(n * 1000 + 15, 2**20, 2**20),
        b.memory(n * 1000 + 600, -(2**20), 0)))])
    steps["deviceProperties"][0]["name"] = f"{NAME} H100"
    training = b.write(folder / "training.json", steps)
    serving = b.write(folder / "serving.json", b.trace([  # operator names, a graph replay's kernel, a decode step
        b.cpu_op("step[DECODE bs=2]", 0, 500, cat="user_annotation"), b.cpu_op(NAME, 2, 400),
        b.launch(5, 10, 7, name="cudaGraphLaunch"), b.kernel(NAME, 20, 100, 7),
        b.kernel("paged_attention_v1_kernel", 130, 100, 7)]))
    snapshot = mb.write(folder / "evil.pickle", mb.snapshot([mb.segment(0, 8 * mb.MIB, [])], [[
        mb.action("alloc", 0, mb.MIB, 0, [mb.frame(NAME, f"/work/{NAME}.py", 7)])]]))
    for args in (["analyze", str(training), "--name", NAME], ["analyze", str(serving), "--name", NAME],
                 ["memory", str(snapshot)]):
        result = CliRunner().invoke(cli, args, env={"GPUSCOPE_HOME": str(home)})
        assert result.exit_code == 0, result.output
    store = Store(home)
    _recorded_run(store)
    _fleet_run(store)
    metas = store.list_runs()
    trace_ids = [m.id for m in metas if m.kind == "trace"]
    urls = ["/", "/fleet", "/fleet?group_by=host", "/compare",
            f"/compare?a={trace_ids[0]}&b={RECORDED}", "/nowhere"]
    for meta in metas:
        urls += [f"/runs/{meta.id}"] + ([f"/runs/{meta.id}/ops", f"/runs/{meta.id}/memory"]
                                        if meta.kind not in ("fleet", "memory") else [])  # those are one page
    downloads = tuple(f"/runs/{i}/timeline/{w}.json.gz" for i in [*trace_ids, RECORDED] for w in ("slowest", "median"))
    yield Site(client=create_app(store).server.test_client(), urls=tuple(urls), downloads=downloads)
    store.close()


def _recorded_run(store: Store) -> None:
    started = time.time_ns() - 90 * 10**9
    store.create_run(RunMeta(id=RECORDED, name=NAME, kind="run", status="complete", started_ns=started,
                             ended_ns=started + 90 * 10**9, pid=4242, command=("python", "train.py", NAME),
                             gpus=(GpuInfo(index=0, name=f"{NAME} H100", memory_bytes=80 * 2**30),)))
    store.add_samples(RECORDED, sample_rows(gpus=1, seconds=90, t0_ns=started))
    store.add_stacks(RECORDED, stack_rows(t0_ns=started), {k: tuple(f"{NAME} {f}" for f in v)
                                                           for k, v in STACKS.items()})
    report = hostile_report(NAME)
    store.save_report(RECORDED, replace(report, run=replace(report.run, id=RECORDED, kind="run")))


def _fleet_run(store: Store) -> None:
    data = fleet({(NAME, 0, NAME): {UTIL: [0.6, 0.5, 0.55]}, ("node-b", 1, "serve-0"): {UTIL: [0.0, 0.0, 0.0]}})
    metrics = ServingMetrics(engine="vllm", window_s=60.0, output_tokens_per_s=100.0, prompt_tokens_per_s=50.0)
    pod = ServingPod(name=NAME, namespace=NAME, pod=NAME, gpus=1, gpu_hours=1.0, cost_usd=2.0, metrics=metrics)
    report = analyze_fleet(data, prices={"H100": price(4.0)})
    save_fleet_run(store, data, replace(report, serving=(pod,)))


def _strings(node: Any) -> Iterator[str]:
    """Every string of decoded JSON, keys included."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)


def _not_printable(answer: Any) -> list[str]:
    return [s for s in _strings(answer) if not s.isprintable()]


def _components(node: Any) -> Iterator[dict[str, Any]]:
    """The props of every component in a decoded layout."""
    if isinstance(node, dict):
        if isinstance(node.get("props"), dict) and "type" in node:
            yield node["props"]
        for value in node.values():
            yield from _components(value)
    elif isinstance(node, list):
        for value in node:
            yield from _components(value)


def _post(client: FlaskClient, output: str, inputs: list[dict[str, Any]], state: list[dict[str, Any]]) -> Any:
    """A callback as dash-renderer posts it; its answer decoded (None for Dash's "no update")."""
    outputs: Any = [{"id": o.rpartition(".")[0], "property": o.rpartition(".")[2]}
                    for o in output.strip(".").split("...")]
    body = {"output": output, "outputs": outputs if output.startswith("..") else outputs[0], "inputs": inputs,
            "state": state, "changedPropIds": [f"{i['id']}.{i['property']}" for i in inputs]}
    answer = client.post("/_dash-update-component", json=body)
    assert answer.status_code in (200, 204), (output, answer.get_data(as_text=True)[:300])
    return json.loads(answer.get_data()) if answer.status_code == 200 else None


def _value(props: dict[str, Any], prop: str) -> Any:
    """What the browser would send for a component's property: a timer's first tick, the first two rows picked."""
    if prop == "n_intervals":
        return 1
    if prop == "selectedRows":
        return (props.get("rowData") or [])[:2]
    return props.get(prop)


def _visit(client: FlaskClient, url: str, callbacks: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """The page at ``url`` as the browser draws it: the router's answer, then every other callback whose inputs the
    page holds, each fired once; (what was asked, its decoded answer)."""
    path, _, search = url.partition("?")
    known = {"url": {"pathname": path, "search": f"?{search}" if search else ""}}
    router = next(c for c in callbacks if c["output"] == "page.children")
    page = _post(client, router["output"], [{**i, "value": known["url"][i["property"]]} for i in router["inputs"]], [])
    answers = [(f"page {url}", page)]
    known |= {props["id"]: props for props in _components(page) if isinstance(props.get("id"), str)}
    for callback in callbacks:
        if callback is router or not all(d["id"] in known for d in callback["inputs"] + callback["state"]):
            continue
        inputs = [{**i, "value": _value(known[i["id"]], i["property"])} for i in callback["inputs"]]
        state = [{**s, "value": _value(known[s["id"]], s["property"])} for s in callback["state"]]
        answers.append((f"{callback['output']} on {url}", _post(client, callback["output"], inputs, state)))
    return answers


def _every_answer(site: Site) -> list[tuple[str, Any]]:
    callbacks = site.client.get("/_dash-dependencies").get_json()
    answers: list[tuple[str, Any]] = [("layout", site.client.get("/_dash-layout").get_json())]
    for url in site.urls:
        answers += _visit(site.client, url, callbacks)
    return answers


@dataclass(frozen=True)
class Answers:
    callbacks: list[tuple[str, Any]]
    """(what was asked, the decoded answer): Dash's layout, and each page's callbacks."""
    shells: dict[str, str]
    """The HTML Dash serves at each page's URL."""
    files: dict[str, Any]
    """The step downloads' answers."""
    warnings: list[warnings.WarningMessage]
    """Every warning raised while answering."""


@pytest.fixture(scope="module")
def answers(site: Site) -> Answers:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callbacks = _every_answer(site)
        shells = {url: site.client.get(url).get_data(as_text=True) for url in site.urls}
        files = {url: site.client.get(url) for url in site.downloads}
    return Answers(callbacks, shells, files, list(caught))


def test_no_answer_holds_a_character_that_is_not_printable(answers: Answers) -> None:
    for asked, answer in answers.callbacks:
        assert _not_printable(answer) == [], asked
    fired = {asked.split(" on ")[0] for asked, _ in answers.callbacks}
    assert fired >= {"..run-body.children...run-tick.disabled..", "run-samples.children",
                     "..runs-table.rowData...runs-tick.disabled..", "..compare-link.href...compare-link.className.."}
    # Each page shows a hostile name, escaped: none passes this test by leaving the names out.
    pages = {asked.removeprefix("page "): answer for asked, answer in answers.callbacks if asked.startswith("page ")}
    for url, page in pages.items():
        shown = " ".join(_strings(page))
        assert (ESCAPED in shown) == (url not in ("/compare", "/nowhere")), url
        assert ANSI not in shown and "\u202e" not in shown
    for url, shell in answers.shells.items():  # the page Dash serves before its callbacks fill it holds no name
        assert {c for c in shell if not c.isprintable()} <= {"\n"}, url
    for url, answer in answers.files.items():  # a step to download is a trace file; its refusal a printable line
        assert answer.mimetype == "application/gzip" or answer.get_data(as_text=True).rstrip("\n").isprintable(), url


def test_drawing_every_page_raises_no_deprecation_warning(answers: Answers) -> None:
    deprecated = [f"{w.filename}:{w.lineno}: {w.message}" for w in answers.warnings
                  if issubclass(w.category, DeprecationWarning | PendingDeprecationWarning | FutureWarning)]
    assert deprecated == []


def test_the_tables_code_strings_are_constants_of_ours(answers: Answers) -> None:
    grids = [props for _, answer in answers.callbacks for props in _components(answer) if "columnDefs" in props]
    ids = {g["id"] for g in grids}
    assert {"runs-table", "ops-table", "fleet-groups", "fleet-idle", "fleet-serving", "serving-graphs",
            "memory-at-peak-0-s"} <= ids, ids
    for table in grids:
        code = [v for key in ("columnDefs", "defaultColDef", "dashGridOptions")
                for v in _code(table.get(key))] + ([table["getRowId"]] if "getRowId" in table else [])
        assert all(CODE.fullmatch(c) for c in code), (table["id"], code)
        assert not table.get("dangerously_allow_code")
        renderers = {c.get("cellRenderer") for c in table["columnDefs"]} - {None}
        assert renderers <= ({"markdown"} if table["id"] == "runs-table" else set()), (table["id"], renderers)


def _code(node: Any) -> Iterator[str]:
    """The strings AG Grid (through dash-ag-grid) would evaluate: ``{"function": ...}`` and style conditions."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("function", "condition") and isinstance(value, str):
                yield value
            else:
                yield from _code(value)
    elif isinstance(node, list):
        for value in node:
            yield from _code(value)


@pytest.mark.parametrize("bad", ["');alert(1);('", ".3f')(x)//", "$,.4~f'", ""])
def test_a_number_format_is_a_d3_specifier_and_nothing_else(bad: str) -> None:
    with pytest.raises(ValueError):
        grid.number_format(bad)
    with pytest.raises(ValueError):
        grid.emphasized(bad or "Running")
    assert CODE.fullmatch(grid.number_format(grid.MONEY)["function"])


def test_a_table_shows_every_cell_printable_and_unknown_numbers_as_none() -> None:
    rows = grid.cells([{"name\x1b": "a\u202eb", "n": float("nan"), "m": float("inf"), "k": 3, "x": ("t\x07",)}])
    assert rows == [{"name\\x1b": "a\\u202eb", "n": None, "m": None, "k": 3, "x": "('t\\x07',)"}]


def test_an_answer_that_forgot_its_escaping_leaves_printable() -> None:
    """The guarantee on its own: a JSON answer holding raw names leaves with each string (and key) printable, and
    one with nothing to escape leaves byte for byte as it was."""
    server = Flask(__name__)
    escape.install(server)
    raw = to_json_plotly({"a\x1b": ["b\u202e", 1.5, None, {"c": "line\nfeed"}], "href": "/runs/x?a=1&b=2"})
    clean = to_json_plotly({"name": "résumé 東京 µs", "href": "/runs/x", "n": [1, 2.5]})
    server.add_url_rule("/raw", "raw", lambda: Response(raw, mimetype="application/json"))
    server.add_url_rule("/clean", "clean", lambda: Response(clean, mimetype="application/json"))
    client = server.test_client()
    assert client.get("/raw").get_json() == {"a\\x1b": ["b\\u202e", 1.5, None, {"c": "line\\x0afeed"}],
                                             "href": "/runs/x?a=1&b=2"}
    assert client.get("/clean").get_data(as_text=True) == clean
