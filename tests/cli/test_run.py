"""`gpuscope run -- CMD`: launch, sample, report, and hand back the command's exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuscope import torch as gtorch
from gpuscope.api.launch import readable_forks, wait_for, yama_needs_hook
from gpuscope.cli.main import app
from gpuscope.store import Store
from tests.as_nobody import NobodyPython
from tests.cli.helpers import gpuscope
from tests.cli.live_targets import TRAIN, pyspy_cannot

FAST = ("--interval", "0.2", "--stack-interval", "0.2")


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_run_joins_live_samples_and_the_trace_the_script_records(gpuscope_home: Path) -> None:
    result = gpuscope("run", *FAST, "--json", "--", sys.executable, str(TRAIN), "--starve", "io", "--seconds", "4",
                      "--profile", home=gpuscope_home)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    out = result.stdout.splitlines()
    assert out[0].startswith("loss ")  # the command's own output comes first
    report = json.loads(out[-1])
    assert report["run"]["kind"] == "run" and report["run"]["status"] == "target_exited"
    assert len(report["ranks"]) == 1  # gpuscope.torch wrote a Kineto trace into the run's folder
    live = report["live"]
    assert live["host"]["workers"] == 2
    assert live["stacks"]["main_startup_samples"] > 0  # importing torch, left out of the shares
    assert live["stacks"]["main_dataloader_wait"] > 0.5
    run_dir = gpuscope_home / "runs" / report["run"]["id"]
    assert list(run_dir.glob("rank0.*.pt.trace.json")) and (run_dir / "rank00000.npz").exists()
    with Store(gpuscope_home) as store:
        run = store.load_run(report["run"]["id"])
    assert run.meta.command[-1] == "--profile" and len(run.traces) == 1 and run.stacks is not None


def test_the_commands_exit_code_is_gpuscopes(gpuscope_home: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--no-stacks", "--interval", "0.1", "--", sys.executable, "-c",
                                      "import sys, time; time.sleep(0.5); sys.exit(3)"])
    assert result.exit_code == 3, result.output
    assert "gpuscope recorded run" in result.stdout  # the report is printed all the same


def test_a_command_killed_by_a_signal_exits_as_a_shell_says() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert wait_for(child) == 128 + 9


def test_a_command_that_cannot_start_is_one_line(gpuscope_home: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--", "no-such-command-here"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("gpuscope: error: cannot run 'no-such-command-here'")
    assert result.stderr.count("\n") == 1
    missing = CliRunner().invoke(app, ["run"])
    assert missing.exit_code == 2
    assert missing.stderr.startswith("gpuscope: error: give the command to run after `--`")


def test_trace_dir_follows_the_run_that_gpuscope_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (gtorch.RUN_ID_ENV, gtorch.HOME_ENV, gtorch.TRACE_DIR_ENV):
        monkeypatch.delenv(name, raising=False)
    assert gtorch.trace_dir() == Path("gpuscope_traces")
    monkeypatch.setenv(gtorch.RUN_ID_ENV, "20261202-120000-abcdef")
    monkeypatch.setenv(gtorch.HOME_ENV, str(tmp_path))
    assert gtorch.trace_dir() == tmp_path / "runs" / "20261202-120000-abcdef"
    monkeypatch.setenv(gtorch.TRACE_DIR_ENV, str(tmp_path / "mine"))
    assert gtorch.trace_dir() == tmp_path / "mine"
    assert gtorch.trace_dir(tmp_path / "given") == tmp_path / "given"
    monkeypatch.setenv("RANK", "3")
    assert gtorch.rank() == 3


def live_report(*command: str, home: Path) -> dict[str, Any]:
    result = gpuscope("run", *FAST, "--json", "--", *command, home=home)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    report: dict[str, Any] = json.loads(result.stdout.splitlines()[-1])
    return report


def launched_pid(report: dict[str, Any], home: Path) -> int | None:
    with Store(home) as store:
        return store.get_meta(report["run"]["id"]).pid


def roles(report: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for proc in report["live"]["processes"]:
        out.setdefault(proc["role"], []).append(proc)
    return out


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_under_torchrun_the_ranks_train_and_the_agent_only_launches(gpuscope_home: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    report = live_report(sys.executable, str(torchrun), "--nproc-per-node=2", str(TRAIN), "--starve", "io",
                         "--seconds", "4", "--workers", "1", home=gpuscope_home)
    by_role = roles(report)
    assert sorted(p["rank"] for p in by_role["trainer"]) == [0, 1]
    assert [p["pid"] for p in by_role["launcher"]] == [launched_pid(report, gpuscope_home)]  # the torchrun agent
    assert len(by_role["loader_worker"]) == 2 and "helper" not in by_role  # one DataLoader worker per rank
    host, stacks = report["live"]["host"], report["live"]["stacks"]
    assert host["trainers"] == 2 and host["workers"] == 2 and host["helpers"] == 0
    # The main-thread shares count the two ranks' main threads and nothing else: recounted from the raw samples,
    # the agent's elastic loop (sampled too) is left out. How the shares split between waiting on the loader and
    # a backward blocked on gloo depends on how far the ranks drift apart, so no share is compared here.
    with Store(gpuscope_home) as store:
        raw = store.load_run(report["run"]["id"]).stacks
    assert raw is not None
    main_rows = raw.samples[raw.samples["tid"] == raw.samples["pid"]]
    trainer_pids = {p["pid"] for p in by_role["trainer"]}
    assert (main_rows["pid"] == by_role["launcher"][0]["pid"]).any()
    assert stacks["main_samples"] + stacks["main_startup_samples"] == main_rows["pid"].isin(trainer_pids).sum()
    assert stacks["main_dataloader_wait"] > 0
    verdict = report["verdict"]
    assert (verdict["primary"], verdict["resource"]) == ("data_loading", "io")


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_under_a_shell_the_python_child_trains(gpuscope_home: Path) -> None:
    # `; true` keeps bash alive as the parent (a lone command would be exec'd in its place).
    script = f"{sys.executable} {TRAIN} --starve cpu --seconds 4 --workers 2; true"
    report = live_report("bash", "-c", script, home=gpuscope_home)
    by_role = roles(report)
    assert [p["pid"] for p in by_role["launcher"]] == [launched_pid(report, gpuscope_home)]
    assert len(by_role["trainer"]) == 1 and len(by_role["loader_worker"]) == 2
    assert report["live"]["stacks"]["main_samples"] > 0  # the trainer's stacks, not a shell's
    verdict = report["verdict"]
    assert (verdict["primary"], verdict["resource"]) == ("data_loading", "cpu")


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_helper_children_of_a_job_without_workers_are_not_workers(gpuscope_home: Path) -> None:
    report = live_report(sys.executable, str(TRAIN), "--starve", "io", "--seconds", "4", "--workers", "0",
                         "--helpers", home=gpuscope_home)
    by_role = roles(report)
    assert [p["pid"] for p in by_role["trainer"]] == [launched_pid(report, gpuscope_home)]
    assert "loader_worker" not in by_role and len(by_role["helper"]) == 2  # a subprocess and a forked child
    assert report["live"]["host"]["workers"] == 0 and report["live"]["host"]["helpers"] == 2
    verdict = report["verdict"]
    assert (verdict["primary"], verdict["resource"]) == ("data_loading", "io")
    codes = [r["code"] for r in report["recommendations"]]
    assert "dataloader_num_workers" in codes
    assert not any("already uses worker processes" in r["detail"] for r in report["recommendations"])


def test_run_takes_the_analysis_options_of_analyze(gpuscope_home: Path) -> None:
    result = CliRunner().invoke(app, ["run", "--no-stacks", "--interval", "0.1", "--job-hours", "2", "--job-steps",
                                      "1000", "--no-save", "--json", "--", sys.executable, "-c",
                                      "import time; time.sleep(0.3)"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["run"]["kind"] == "run"
    with Store(gpuscope_home) as store:
        assert store.list_runs() == []
    bad = CliRunner().invoke(app, ["run", "--job-hours", "-1", "--", "true"])
    assert bad.exit_code == 2


PROBE = """
import builtins, json, os, sys
hook = sys.modules["_gpuscope_ptracer"]
pid = os.fork()
if pid == 0:
    print(json.dumps({"child": os.getpid(), "calls": hook.calls}), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print(json.dumps({"parent": os.getpid(), "calls": hook.calls, "user_site": getattr(builtins, "USER_SITE", False)}))
"""


def test_under_yama_every_python_process_and_fork_names_gpuscope_its_tracer(tmp_path: Path) -> None:
    # Yama's tracer exception is per process and forks do not inherit it: the hook must run in each.
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE = True\n")
    with readable_forks({**os.environ, "PYTHONPATH": str(own)}, stacks=True, needed=lambda: True) as env:
        assert env["GPUSCOPE_PTRACER"] == str(os.getpid())
        out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    child, parent = (json.loads(line) for line in out.stdout.splitlines())
    assert parent["calls"] == [parent["parent"]] and child["calls"] == [parent["parent"], child["child"]]
    assert parent["user_site"]  # the user's own sitecustomize still runs
    with readable_forks(dict(os.environ), stacks=True, needed=lambda: False) as plain:
        assert "GPUSCOPE_PTRACER" not in plain and plain.get("PYTHONPATH") == os.environ.get("PYTHONPATH")


def test_yama_scope_is_read_from_the_kernel(tmp_path: Path) -> None:
    scope = tmp_path / "ptrace_scope"
    scope.write_text("1\n")
    assert yama_needs_hook(scope, euid=1000) and not yama_needs_hook(scope, euid=0)
    scope.write_text("0\n")
    assert not yama_needs_hook(scope, euid=1000)
    assert not yama_needs_hook(tmp_path / "no-yama", euid=1000)


@pytest.mark.skipif(pyspy_cannot() is not None, reason=str(pyspy_cannot()))
def test_a_non_root_user_gets_the_stacks_of_the_workers_the_command_forks(nobody_python: NobodyPython) -> None:
    # gpuscope, its interpreter and the target as nobody may run them, whatever the checkout's permissions.
    with tempfile.TemporaryDirectory(prefix="gpuscope-nobody-") as folder:  # pytest's tmp_path is root's alone
        Path(folder).chmod(0o777)
        run_as_nobody(nobody_python, Path(folder))


def run_as_nobody(python: NobodyPython, home: Path) -> None:
    env = {**python.env, "GPUSCOPE_HOME": str(home), "COLUMNS": "120", "HOME": str(home)}
    train = python.targets / "train_loader.py"
    result = subprocess.run(python.argv("-m", "gpuscope", "run", *FAST, "--json", "--", str(python.python),
                                        str(train), "--starve", "io", "--seconds", "4", "--workers", "2"),
                            capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "may not read" not in result.stderr, result.stderr
    live = json.loads(result.stdout.splitlines()[-1])["live"]
    assert live["stacks"]["worker_samples"] > 0 and live["host"]["workers"] == 2
