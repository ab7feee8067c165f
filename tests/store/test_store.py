"""The run store: catalog, samples, reports, prefixes, schema version, and cut-off writers."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.model.diagnosis import Verdict
from gpuscope.model.gpu import GpuInfo
from gpuscope.model.report import Report, RunSummary
from gpuscope.model.run import RunMeta
from gpuscope.model.schema import GPU_UTIL, HOST, NO_PID, NVML, PROC_CPU_CORES, SAMPLE_COLUMNS
from gpuscope.store import Store, StoreError, new_run_id
from gpuscope.store.migrations import MIGRATIONS, SCHEMA_VERSION, statements


def meta(run_id: str, *, status: str = "complete", started_ns: int = 1_000) -> RunMeta:
    return RunMeta(id=run_id, name=f"job <{run_id}>", kind="attach", status=status,  # type: ignore[arg-type]
                   started_ns=started_ns,
                   gpus=(GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=80 * 2**30),),
                   command=("python", "train.py"), pid=4242, tags={"team": "vision"})


def test_catalog_round_trip_newest_first(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.create_run(meta("a", started_ns=1))
        store.create_run(meta("b", started_ns=2))
        runs = store.list_runs()
        assert [r.id for r in runs] == ["b", "a"]
        got = store.get_meta("a")
        assert got.gpus[0].name == "NVIDIA H100 80GB HBM3" and got.command == ("python", "train.py")
        assert got.tags == {"team": "vision"} and got.pid == 4242 and got.host
        store.update_run("a", status="target_exited", ended_ns=99)
        assert store.get_meta("a").status == "target_exited" and store.get_meta("a").ended_ns == 99


def test_samples_keep_missing_counters_missing(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.create_run(meta("r"))
        store.add_samples("r", [(10, NVML, 0, NO_PID, GPU_UTIL, 0.5), (20, HOST, -1, 7, PROC_CPU_CORES, 1.25)])
        store.add_samples("r", [(30, NVML, 0, NO_PID, GPU_UTIL, 0.0)])
        frame = store.samples("r")
        assert frame["ts_ns"].tolist() == [10, 20, 30]
        assert frame.loc[frame.metric == GPU_UTIL, "value"].tolist() == [0.5, 0.0]
        assert store.samples("r", metrics=[PROC_CPU_CORES])["pid"].tolist() == [7]
        assert store.samples("r", since_ns=20)["ts_ns"].tolist() == [30]
        assert store.sample_counts() == {"r": 3}


def test_stacks_round_trip(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.create_run(meta("s"))
        store.add_stacks("s", [(1, 10, 11, "active", 0), (2, 10, 11, "idle", 1)],
                         {0: ("main (train.py:3)", "step (train.py:9)"), 1: ("main (train.py:3)",)})
        stacks = store.stacks("s")
        assert stacks is not None and len(stacks.samples) == 2 and stacks.stacks[0][-1] == "step (train.py:9)"


def test_report_round_trip_and_findings_index(tmp_path: Path) -> None:
    report = Report(run=RunSummary(id="x", kind="trace"), ranks=(),
                    verdict=Verdict(primary="data_loading", resource="unknown", confidence=0.8))
    with Store(tmp_path) as store:
        store.create_run(meta("x"))
        assert store.load_report("x") is None
        store.save_report("x", report)
        assert store.load_report("x") == report
        assert store.load_run("x").meta.id == "x"


def test_resolve_by_unique_prefix(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.create_run(meta("20260101-000000-aaaaaa"))
        store.create_run(meta("20260101-000000-abbbbb"))
        assert store.resolve("20260101-000000-aa") == "20260101-000000-aaaaaa"
        with pytest.raises(StoreError, match="ambiguous"):
            store.resolve("20260101-000000-a")
        with pytest.raises(StoreError, match="no run"):
            store.resolve("zzz")
        with pytest.raises(StoreError, match="no run"):
            store.resolve("2026%")


def test_schema_version_is_recorded_and_a_newer_store_is_refused(tmp_path: Path) -> None:
    Store(tmp_path).close()
    db = sqlite3.connect(tmp_path / "gpuscope.db")
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="newer than this gpuscope"):
        Store(tmp_path)


def test_unusable_home_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(StoreError, match="cannot open the run store"):
        Store(blocker)


def test_a_running_run_whose_writer_was_killed_is_interrupted_with_its_samples(tmp_path: Path) -> None:
    script = (
        "import sys, time, os\n"
        "from gpuscope.store import Store\n"
        "from gpuscope.model.run import RunMeta\n"
        "s = Store(sys.argv[1])\n"
        "s.create_run(RunMeta(id='live', name='live', kind='attach', status='running', started_ns=1))\n"
        "s.add_samples('live', [(5, 'host', -1, 1, 'proc.cpu_cores', 1.0)])\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        with Store(tmp_path) as store:  # the writer is alive: the run stays running
            assert store.get_meta("live").status == "running"
    finally:
        child.kill()
        child.wait()
    with Store(tmp_path) as store:
        got = store.get_meta("live")
        assert got.status == "interrupted" and got.ended_ns is not None
        assert len(store.samples("live")) == 1


def test_run_ids_sort_by_start_time() -> None:
    early, late = new_run_id(1_700_000_000 * 10**9), new_run_id(1_800_000_000 * 10**9)
    assert early < late and len(early.split("-")) == 3
    assert new_run_id() != new_run_id()


def test_samples_across_blocks_with_different_names_filter_and_order(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.create_run(meta("b"))
        store.add_samples("b", [(30, NVML, 0, NO_PID, GPU_UTIL, 0.3), (10, HOST, -1, 9, PROC_CPU_CORES, 2.0)])
        store.add_samples("b", [(20, HOST, -1, 9, PROC_CPU_CORES, 1.0), (40, NVML, 1, NO_PID, GPU_UTIL, 0.4)])
        store.add_samples("b", [])
        frame = store.samples("b")
        assert frame["ts_ns"].tolist() == [10, 20, 30, 40]
        assert frame["metric"].tolist() == [PROC_CPU_CORES, PROC_CPU_CORES, GPU_UTIL, GPU_UTIL]
        assert frame["source"].tolist() == [HOST, HOST, NVML, NVML] and frame["gpu"].tolist() == [-1, -1, 0, 1]
        assert store.samples("b", metrics=[GPU_UTIL])["value"].tolist() == [0.3, 0.4]
        assert store.samples("b", since_ns=25)["ts_ns"].tolist() == [30, 40]
        assert store.samples("other").empty and list(store.samples("other").columns) == list(SAMPLE_COLUMNS)


def test_a_version_1_store_keeps_its_samples_after_migration(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "gpuscope.db")
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO runs (id, name, kind, status, started_ns) VALUES ('old', 'old', 'attach', 'complete', 1)")
    db.execute("INSERT INTO samples VALUES ('old', 5, 'nvml', 0, -1, 'gpu.util', 0.5)")
    db.commit()
    db.close()
    with Store(tmp_path) as store:
        store.add_samples("old", [(7, NVML, 0, NO_PID, GPU_UTIL, 0.7)])
        assert store.samples("old")["value"].tolist() == [0.5, 0.7]
        assert store.sample_counts() == {"old": 2}


def test_migrations_split_where_sqlite_says_a_statement_ends() -> None:
    script = """
        CREATE TABLE notes (text TEXT DEFAULT 'a; b');  -- a comment; with a semicolon
        CREATE TRIGGER keep AFTER INSERT ON notes BEGIN UPDATE notes SET text = text || ';'; END;
        INSERT INTO notes VALUES ('x;y');
    """
    found = statements(script)
    assert len(found) == 3 and found[1].endswith("END;")
    db = sqlite3.connect(":memory:")
    for statement in found:
        db.execute(statement)
    assert db.execute("SELECT text FROM notes").fetchall() == [("x;y;",)]
    assert [len(statements(m)) for m in MIGRATIONS] == [9, 2, 2]  # the store's own: every CREATE on its own
