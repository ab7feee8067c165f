"""A command imports what it uses: `gpuscope --help` loads none of the commands' modules, and the commands that
only read the store or a few files never load the heavy libraries. Checked by the modules a real process had
imported when it ended, never by a clock."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from gpuscope.cli.main import COMMANDS, app

HEAVY = ("pandas", "pyarrow", "plotly", "dash", "torch", "distributed", "fsspec", "scipy")
"""Libraries no light command needs."""
READER = ("gpuscope.traces.kineto", "gpuscope.traces.loader", "gpuscope.traces.workers", "concurrent.futures",
          "multiprocessing")
"""The trace reader and its worker pool: only the commands that read traces load them."""
OURS = ("numpy", "gpuscope.model", "gpuscope.traces", "gpuscope.store", "gpuscope.analyzers", "gpuscope.cli.guard",
        *(f"gpuscope.cli.{name}" for name in COMMANDS))
"""What the top-level help needs none of: its listing is drawn from ``COMMANDS``."""


RECORD = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "gpuscope"
from gpuscope.cli.main import main
main()
"""


def imported(*argv: str, home: Path, succeeds: bool = False) -> set[str]:
    """The modules a real `gpuscope ARGV` process had imported when it ended (which exited 0, with ``succeeds``)."""
    out = home.with_name(home.name + ".modules.json")
    run = subprocess.run([sys.executable, "-c", RECORD, str(out), *argv], capture_output=True, timeout=120,
                         env={**os.environ, "GPUSCOPE_HOME": str(home)})
    assert run.returncode == 0 or not succeeds, run.stderr
    return set(json.loads(out.read_text()))


def loaded(modules: set[str], names: tuple[str, ...]) -> set[str]:
    return {m for m in modules if any(m == n or m.startswith(n + ".") for n in names)}


@pytest.mark.parametrize("argv", [("--help",), (), ("--version",)])
def test_the_top_level_help_loads_no_command(argv: tuple[str, ...], tmp_path: Path) -> None:
    modules = imported(*argv, home=tmp_path)
    assert "gpuscope.cli.main" in modules
    assert loaded(modules, HEAVY + OURS) == set()


LIGHT: dict[str, tuple[str, ...]] = {
    # the listing decodes saved reports and gives each the verdict `show` gives (the diagnosis, which needs numpy)
    "runs": HEAVY + READER,
    "prices": HEAVY + READER + ("numpy", "gpuscope.analyzers", "gpuscope.api.analysis", "gpuscope.store.sqlite"),
    "hang": HEAVY + READER + ("numpy", "gpuscope.store.sqlite", "gpuscope.model.report", "gpuscope.api.analysis"),
}
"""What each light command never loads."""


@pytest.mark.parametrize("argv", [("runs",), ("prices",), ("prices", "--gpu", "H100 SXM"), ("hang", "{dumps}")])
def test_light_commands_load_only_what_they_use(argv: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "dumps").mkdir()
    for rank, seqs in ((0, (1, 2)), (1, (1,))):  # rank 1 never joined all_reduce #2: `hang` reads and answers
        entries = [{"collective_seq_id": s, "profiling_name": "nccl:all_reduce", "state": "started" if s == 2 else
                    "completed", "process_group": ["0", "default_pg"], "input_sizes": [[8]], "input_dtypes": ["Float"],
                    "output_sizes": [[8]], "output_dtypes": ["Float"], "time_created_ns": s} for s in seqs]
        (tmp_path / "dumps" / f"nccl_trace_rank_{rank}").write_text(json.dumps({"version": "2.10",
                                                                               "entries": entries}))
    modules = imported(*(a.format(dumps=tmp_path / "dumps") for a in argv), home=tmp_path / "home", succeeds=True)
    assert f"gpuscope.cli.{argv[0]}" in modules
    assert loaded(modules, LIGHT[argv[0]]) == set()


def test_a_command_s_help_loads_neither_the_reader_nor_the_analyzers(tmp_path: Path) -> None:
    modules = imported("analyze", "--help", home=tmp_path)
    assert "gpuscope.cli.analyze" in modules
    assert loaded(modules, HEAVY + READER + ("numpy", "gpuscope.analyzers", "gpuscope.api.analysis")) == set()


def test_the_listing_says_what_each_command_says_of_itself() -> None:
    group = typer.main.get_command(app)
    ctx = group.context_class(group)
    assert list(group.list_commands(ctx)) == list(COMMANDS)  # type: ignore[attr-defined]
    for name, summary in COMMANDS.items():
        command = group.get_command(ctx, name)  # type: ignore[attr-defined]
        assert command is not None
        assert command.get_short_help_str(limit=10_000) == summary, name


def test_the_listing_names_every_command_and_a_wrong_one_is_one_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "GPUSCOPE_HOME": str(tmp_path), "COLUMNS": "200"}
    shown = subprocess.run([sys.executable, "-m", "gpuscope", "--help"], capture_output=True, text=True, env=env,
                           timeout=120)
    assert shown.returncode == 0
    assert all(re.search(rf"\b{name}\b", shown.stdout) for name in COMMANDS)
    wrong = subprocess.run([sys.executable, "-m", "gpuscope", "analyse"], capture_output=True, text=True, env=env,
                           timeout=120)
    assert wrong.returncode == 2
    assert "No such command 'analyse'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
