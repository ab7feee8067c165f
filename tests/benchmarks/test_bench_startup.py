"""The start-up benchmark: what it runs is a real answer of each command (the hang it measures is one), and the
script runs with its sibling modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuscope.api.hang import hang
from tests.conftest import ROOT, load_benchmark

startup = load_benchmark("bench_startup")


def test_the_dumps_it_measures_hang_on_a_rank_that_never_joined(tmp_path: Path) -> None:
    report = hang(startup._hang_dumps(tmp_path / "dumps"))
    assert report.hung_collective is not None and report.hung_collective.seq == 3
    assert report.missing_ranks == (1,) and report.waiting_ranks == (0,)


def test_every_command_it_times_is_a_gpuscope_command_or_a_floor(tmp_path: Path) -> None:
    from gpuscope.cli.main import COMMANDS

    for label, argv in startup.commands(sys.executable, tmp_path):
        assert argv[0] == sys.executable
        if argv[1:3] == ["-m", "gpuscope"]:
            assert argv[3] in (*COMMANDS, "--help", "--version"), label
        else:
            assert argv[1] == "-c", label


def test_the_script_runs_with_its_sibling_modules() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_startup.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--repeat" in out
