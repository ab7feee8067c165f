"""Damaged run stores for the fuzzers (``fuzz_readers.py``'s ``store`` and ``dashboard`` readers), and every
dashboard route asked of one.

The base store is made once per process, the same way each time (its run ids fixed): two analysed traces (the DLRM
sample's rank 0, and a torch.compile trace run on the CPU), a recorded run with two minutes of samples of two GPUs
and its report, and a fleet run (the bundled demo). An input is a copy of it damaged one to three ways, drawn from
the seed: a saved trace's bytes mutated or cut, its arrays given values no reader makes (negative or huge durations
and times, events out of order, kinds and name ids out of range, another type or shape) or its header's JSON
mutated; a database page overwritten, the file cut, a row's field given random bytes, a number, or mutated JSON; a
run folder or a trace removed, junk in staging/, a save's lock file left in a run folder.
"""

from __future__ import annotations

import io
import json
import random
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import fuzz_inputs as fi
import numpy as np

TRACES = ("dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz", "torch_compile_cpu/first_call.json.gz")
TRACE_IDS = ("20260101-000001-aaaaa1", "20260101-000002-aaaaa2")
LIVE_ID = "20260101-000003-aaaaa3"
FLEET_ID = "20260101-000004-aaaaa4"
IDS = (*TRACE_IDS, LIVE_ID, FLEET_ID)
DASHBOARD = "@dashboard"
"""The first argument of a dashboard input (not a command: every route is asked of the store)."""
T0_NS = 1_767_225_600_000_000_000


@cache
def base_store() -> dict[str, bytes]:
    """Every file of the base store, by its path under the store's folder."""
    from typer.testing import CliRunner

    from gpuscope.analyzers.report import AnalysisOptions, build_report
    from gpuscope.api.analysis import analyze_path
    from gpuscope.cli.main import app
    from gpuscope.model.gpu import GpuInfo
    from gpuscope.model.run import RunMeta
    from gpuscope.store import Store

    with tempfile.TemporaryDirectory(prefix="gpuscope-base-store-") as folder:
        home = Path(folder)
        ids = iter(IDS)
        with mock.patch("gpuscope.api.analysis.new_run_id", lambda *_: next(ids)), Store(home) as store:
            for rel in TRACES:
                analyze_path(fi.SAMPLES / rel, save=True, store=store)
            next(ids)
            store.create_run(RunMeta(id=LIVE_ID, name="train", kind="attach", status="complete", started_ns=T0_NS,
                                     ended_ns=T0_NS + 120 * 10**9, command=("python", "train.py"), pid=100,
                                     gpus=tuple(GpuInfo(index=g, name="NVIDIA H100 80GB HBM3") for g in range(2))))
            store.add_samples(LIVE_ID, _rows(np.random.default_rng(5)))
            store.save_report(LIVE_ID, build_report(store.load_run(LIVE_ID), AnalysisOptions()))
        with mock.patch("gpuscope.fleet.saved.new_run_id", lambda *_: next(ids)):
            done = CliRunner().invoke(app, ["fleet", "--demo", "--json"], env={"GPUSCOPE_HOME": str(home)})
        assert done.exit_code == 0, done.output
        return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}


def _rows(rng: np.random.Generator) -> list[tuple[int, str, int, int, str, float]]:
    from gpuscope.model import schema as m

    ts = (T0_NS + np.arange(120) * 10**9).tolist()
    rows = []
    for g in range(2):
        util = rng.uniform(0.2, 1.0, len(ts)).tolist()
        rows += [(t, m.NVML, g, m.NO_PID, m.GPU_UTIL, u) for t, u in zip(ts, util, strict=True)]
        rows += [(t, m.NVML, g, m.NO_PID, m.GPU_MEMORY_USED_BYTES, 6e10) for t in ts]
    rows += [(t, m.HOST, m.NO_GPU, 100, m.PROC_CPU_CORES, 1.0) for t in ts]
    return rows


# -- damage ------------------------------------------------------------------------------------------------

Files = dict[str, bytes]


def damaged_store(rng: random.Random) -> Files:
    """A copy of the base store's files, damaged one to three ways."""
    files = dict(base_store())
    for _ in range(rng.choice((1, 1, 2, 3))):
        damage = rng.choice(DAMAGES)
        damage(rng, files)
    return files


def _npz_name(rng: random.Random, files: Files) -> str | None:
    names = sorted(n for n in files if n.endswith(".npz"))
    return rng.choice(names) if names else None


def _npz_bytes(rng: random.Random, files: Files) -> None:
    name = _npz_name(rng, files)
    if name is not None and files[name]:
        data = files[name]
        files[name] = data[:rng.randrange(len(data))] if rng.random() < 0.3 else fi.mutate_bytes(rng, data)


def _npz_values(rng: random.Random, files: Files) -> None:
    """An array of a saved trace (or fleet run) given values, a type or a shape no writer makes."""
    name = _npz_name(rng, files)
    if name is None:
        return
    try:
        with np.load(io.BytesIO(files[name]), allow_pickle=False) as data:
            arrays = dict(data)
    except Exception:  # noqa: BLE001 - already damaged beyond numpy: left as it is
        return
    key = rng.choice(sorted(arrays))
    with np.errstate(all="ignore"):  # casts that overflow are the point
        arrays[key] = _odd_array(rng, arrays[key], key)
    out = io.BytesIO()
    np.savez(out, **arrays)
    files[name] = out.getvalue()


def _odd_array(rng: random.Random, a: np.ndarray[Any, Any], key: str) -> np.ndarray[Any, Any]:
    if key == "header" and rng.random() < 0.8:
        try:
            doc = fi.mutate_doc(rng, json.loads(a.tobytes()))
            return np.frombuffer(fi.dumps(doc), dtype=np.uint8)
        except (ValueError, RecursionError):  # a header already nested past what json reads
            pass
    how = rng.randrange(8)
    if how == 0 and a.size and a.dtype.kind in "iu":
        a = a.copy()
        info = np.iinfo(a.dtype)
        a.flat[rng.randrange(a.size)] = rng.choice((info.min, info.max, 0, -1 if info.min < 0 else 1))
        return a
    if how == 1 and a.dtype.kind in "iu":
        return (a.astype(np.int64) - rng.choice((1, 10**9, 337 * 10**9))).astype(a.dtype)  # wraps where narrow
    if how == 2:
        return a[::-1].copy()
    if how == 3:
        return a.astype(rng.choice((np.float64, np.int8, np.uint64, np.bool_, np.float16)))
    if how == 4:
        return a[:rng.randrange(a.size)] if a.size else np.zeros(3, a.dtype)
    if how == 5:
        return a.reshape(1, -1) if a.size else a.reshape(0, 1)
    if how == 6 and a.size:
        return np.random.default_rng(rng.randrange(2**32)).permutation(a)
    return np.asarray(rng.choice(([], ["x"], [1.5], [[1, 2]], [-(2**63)])))


def _drop(rng: random.Random, files: Files) -> None:
    """A saved trace, a fleet run's file or a whole run folder gone."""
    runs = sorted(n for n in files if n.startswith("runs/"))
    if not runs:
        return
    victim = rng.choice(runs)
    if rng.random() < 0.5:
        del files[victim]
    else:
        folder = victim.rsplit("/", 1)[0] + "/"
        for name in [n for n in files if n.startswith(folder)]:
            del files[name]


def _litter(rng: random.Random, files: Files) -> None:
    """What killed processes leave: a staging folder, a lock file, a save's lock file in a run folder."""
    what = rng.randrange(3)
    if what == 0:
        files[f"staging/{rng.randrange(10**6):06x}/a.npz"] = rng.randbytes(rng.randrange(200))
    elif what == 1:
        files[f"staging/{rng.randrange(10**6):06x}.lock"] = b""
    else:
        files[f"runs/{rng.choice(IDS)}/.saving"] = b""


def _with_db(change: Callable[[random.Random, Path], None]) -> Callable[[random.Random, Files], None]:
    """A damage done through SQLite (or to the file), on the database of the files."""
    def damage(rng: random.Random, files: Files) -> None:
        if "gpuscope.db" not in files:
            return
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "gpuscope.db"
            db.write_bytes(files["gpuscope.db"])
            try:
                change(rng, db)
            except sqlite3.DatabaseError:
                return
            files["gpuscope.db"] = db.read_bytes()
    return damage


def _page(rng: random.Random, db: Path) -> None:
    data = bytearray(db.read_bytes())
    pages = max(len(data) // 4096, 1)
    at = rng.randrange(1 if pages > 1 and rng.random() < 0.9 else 0, pages) * 4096
    data[at:at + 4096] = rng.randbytes(4096) if rng.random() < 0.7 else fi.mutate_bytes(rng, bytes(data[at:at + 4096]))
    db.write_bytes(bytes(data))


def _cut(rng: random.Random, db: Path) -> None:
    data = db.read_bytes()
    if len(data) > 100:
        db.write_bytes(data[:rng.randrange(100, len(data))])


FIELDS = (("runs", "name"), ("runs", "command"), ("runs", "gpus"), ("runs", "tags"), ("runs", "status"),
          ("runs", "started_ns"), ("runs", "ended_ns"), ("runs", "kind"), ("runs", "pid"), ("reports", "report"),
          ("sample_blocks", "data"), ("sample_blocks", "names"), ("findings", "code"))


def _field(rng: random.Random, db: Path) -> None:
    table, column = rng.choice(FIELDS)
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(f"SELECT rowid, {column} FROM {table}").fetchall()
        if not rows:
            return
        rowid, value = rng.choice(rows)
        conn.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (_odd_field(rng, value), rowid))
        conn.commit()
    finally:
        conn.close()


def _odd_field(rng: random.Random, value: Any) -> Any:
    if isinstance(value, (str, bytes)) and rng.random() < 0.5:
        try:
            return fi.dumps(fi.mutate_doc(rng, json.loads(value))).decode("utf-8", "replace")
        except (ValueError, RecursionError):  # not JSON, or JSON nested past what json reads
            return fi.mutate_bytes(rng, value if isinstance(value, bytes) else value.encode())
    return rng.choice((None, -1, 2**63 - 1, 1.5, "", "\u202e x", rng.randbytes(rng.randrange(64)), "[1, 2",
                       '{"sources": 3}'))


DAMAGES: tuple[Callable[[random.Random, Files], None], ...] = (
    _npz_bytes, _npz_values, _npz_values, _drop, _litter, _with_db(_page), _with_db(_cut), _with_db(_field),
    _with_db(_field))


# -- inputs -------------------------------------------------------------------------------------------------

def _some_run(rng: random.Random) -> str:
    run_id = rng.choice(IDS)
    return run_id[:rng.randrange(8, len(run_id) + 1)] if rng.random() < 0.2 else run_id


Case = tuple[Files, tuple[str, ...], dict[str, str]]
"""An input as ``fuzz_readers.Case`` takes it: files, the command's arguments, environment."""


def store_case(rng: random.Random) -> Case:
    """A damaged store under one command that reads it."""
    run = _some_run(rng)
    args = rng.choice((("ops", run, *(["--json"] if rng.random() < 0.5 else [])),
                       ("timeline", run, "-o", "{dir}/steps"),
                       ("diff", run, _some_run(rng), *(["--json"] if rng.random() < 0.5 else [])),
                       ("show", run, *(["--reanalyze"] if rng.random() < 0.5 else []),
                        *(["--json"] if rng.random() < 0.5 else [])),
                       ("runs", *(["--json"] if rng.random() < 0.5 else [])),
                       ("report", run, "-o", "{dir}/report.html")))
    return {f"home/{k}": v for k, v in damaged_store(rng).items()}, args, {"GPUSCOPE_HOME": "{dir}/home"}


def dashboard_case(rng: random.Random) -> Case:
    """A damaged store, every dashboard route asked of it."""
    return {f"home/{k}": v for k, v in damaged_store(rng).items()}, (DASHBOARD,), {}


# -- the dashboard's routes ------------------------------------------------------------------------------------

def routes() -> Iterator[tuple[str, str, dict[str, Any] | None]]:
    """Every page, refresh and download of the dashboard for the base store's runs: (what, path, callback)."""
    import bench_dashboard_load as browser

    yield "the runs list", "/", None
    for run_id in IDS:
        yield f"page {run_id}", f"/runs/{run_id}", None
        for which in ("slowest", "median"):
            yield f"download {which} of {run_id}", f"/runs/{run_id}/timeline/{which}.json.gz", None
    pages = ["/", "/fleet", f"/fleet?run={FLEET_ID}", f"/compare?a={TRACE_IDS[0]}&b={LIVE_ID}",
             f"/compare?a={TRACE_IDS[0]}&b={TRACE_IDS[1]}"]
    for run_id in IDS:
        pages += [f"/runs/{run_id}", f"/runs/{run_id}/ops"]
    for page in pages:
        path, _, search = page.partition("?")
        yield f"callback page {page}", "", browser.router(path, f"?{search}" if search else "")
    yield "callback runs refresh", "", browser.runs_tick()
    for run_id in IDS:
        yield f"callback charts of {run_id}", "", browser.run_charts(run_id)
        yield f"callback refresh of {run_id}", "", browser.run_tick(run_id)


def ask_every_route(home: Path) -> tuple[str, str]:
    """(outcome, one line): a store `gpuscope dashboard` refuses is a user error (it exits 2 with the line); an
    answer of HTTP 500 or more, one holding a traceback, or a page showing an internal error is a crash."""
    from gpuscope.dashboards import create_app
    from gpuscope.store import Store, StoreError

    try:
        store = Store(home)
    except StoreError as exc:
        return "user_error", str(exc)
    with store:
        client = create_app(store).server.test_client()
        for what, path, body in routes():
            answer = client.get(path) if body is None else client.post("/_dash-update-component", json=body)
            text = answer.get_data()
            if answer.status_code >= 500 or b"Traceback" in text or b"internal error: " in text:
                first = text.decode(errors="replace").strip().splitlines()[:1]
                return "crash", f"{what}: HTTP {answer.status_code}: {first[0][:300] if first else ''}"
    return "result", ""

