"""py-spy stack sampling against real processes, and the pure rules that sort a stack sample."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuscope.analyzers.stacks import classify_main, classify_worker, is_loader_worker
from gpuscope.collectors import stacks as st
from gpuscope.collectors.stacks import StackSampler, classify_error, find_pyspy, stack_frames
from tests.as_nobody import AS_NOBODY, NobodyPython
from tests.cli.live_targets import started, wait_ready

TARGETS = Path(__file__).resolve().parent.parent / "targets"
needs_pyspy = pytest.mark.skipif(find_pyspy() is None, reason="py-spy is not installed (extra [stacks])")
DUMPS = 10


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[bytes]]:
    with started(str(TARGETS / "spin.py"), "60") as proc:  # returned once it spins
        yield proc


def sample_until(sampler: StackSampler, pid: int, want: str) -> st.StackBatch:
    """Sample a target that is already in ``want`` (it said so) until its main thread shows it: a few dumps, for a
    dump that fails or catches the thread between frames now and then, never a wait for it to start."""
    for attempt in range(DUMPS):
        batch = sampler.sample(attempt * 10**9)
        frames = {sid: f for sid, f in batch.stacks.items()}
        if any(want in " ".join(sampler_frames(sampler, sid, frames)) for _, p, tid, _, sid in batch.rows
               if p == pid and tid == pid):
            return batch
    raise AssertionError(f"{want!r} never showed in pid {pid}'s main thread in {DUMPS} dumps")


def sampler_frames(sampler: StackSampler, stack_id: int, new: dict[int, tuple[str, ...]]) -> tuple[str, ...]:
    return new.get(stack_id) or next(f for f, i in sampler._ids.items() if i == stack_id)


# -- against real processes ------------------------------------------------------------------

@needs_pyspy
def test_samples_every_thread_of_a_real_process(spinner: subprocess.Popen[bytes]) -> None:
    sampler = StackSampler(lambda: {spinner.pid}, every_s=0.5)
    sample_until(sampler, spinner.pid, "spin (")
    states: dict[int, set[str]] = {}
    stacks: dict[int, list[tuple[str, ...]]] = {}
    # A few looks: a spinning thread may be caught waiting for the GIL now and then, and a dump that does not stop
    # the target (--nonblocking) may read a stack while a frame is pushed, and see only its inner part.
    for i in range(5):
        batch = sampler.sample((100 + i) * 10**9)
        for _, _pid, tid, state, sid in batch.rows:
            states.setdefault(tid, set()).add(state)
            stacks.setdefault(tid, []).append(sampler_frames(sampler, sid, batch.stacks))
    assert len(states) == 2  # the spinning main thread and the napping helper
    assert "active" in states[spinner.pid]
    whole = [f for f in stacks[spinner.pid] if f[0].startswith("<module> (")]  # outermost first
    assert any(any(line.startswith("spin (") for line in f) for f in whole)
    (napper,) = set(states) - {spinner.pid}
    assert "idle" in states[napper]
    assert any(any(line.startswith("napper (") for line in f) for f in stacks[napper])
    assert sampler.problems == []


@needs_pyspy
def test_stacks_are_interned_and_cadence_is_kept(spinner: subprocess.Popen[bytes]) -> None:
    sampler = StackSampler(lambda: {spinner.pid}, every_s=1.0)
    sample_until(sampler, spinner.pid, "spin (")
    t0 = 100 * 10**9
    first = sampler.sample(t0)
    assert sampler.sample(t0 + 500_000_000).rows == []  # within every_s: no dump
    later = sampler.sample(t0 + 1_000_000_000)
    assert first.rows and later.rows
    napper_ids = {sid for _, _, tid, _, sid in first.rows + later.rows if tid != spinner.pid}
    assert len(napper_ids) == 1  # the same stack twice gets one id, its frames sent once
    assert not napper_ids & set(later.stacks)


@needs_pyspy
def test_a_process_that_is_not_python_is_dropped_once() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        sampler = StackSampler(lambda: {sleeper.pid}, every_s=0.1)
        problem = sampler.check(sleeper.pid)
        assert problem is not None and problem.kind == "not_python"
        sampler2 = StackSampler(lambda: {sleeper.pid}, every_s=0.1)
        for i in range(st.NOT_PYTHON_AFTER + 2):
            assert sampler2.sample(i * 10**9).rows == []
        assert [p.kind for p in sampler2.take_problems()] == ["not_python"]
        assert sampler2.take_problems() == []
        assert sampler2.enabled  # its other processes may still be Python
    finally:
        sleeper.kill()
        sleeper.wait()


@needs_pyspy
def test_a_gone_pid_is_skipped_quietly() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sampler = StackSampler(lambda: {proc.pid}, every_s=0.1)
    assert sampler.sample(0).rows == []
    assert sampler.take_problems() == []


@needs_pyspy
def test_a_refused_pid_is_skipped_and_named_once_and_the_others_are_still_sampled(
        spinner: subprocess.Popen[bytes], nobody_python: NobodyPython) -> None:
    # py-spy run as user nobody may not ptrace root's process (a real refusal from the kernel), but
    # may read nobody's own process: one refusal must not cost the other's stacks. Nobody's process runs a copy
    # of the target with an interpreter nobody may run (the checkout may be private: tests/as_nobody.py).
    assert nobody_python.pyspy is not None
    own = subprocess.Popen(nobody_python.argv(str(nobody_python.targets / "spin.py"), "60"),
                           env=nobody_python.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_ready(own)  # nobody's interpreter, mirrored, may take seconds to start on a loaded machine
        sampler = StackSampler(lambda: {spinner.pid, own.pid}, roots=lambda: {spinner.pid, own.pid}, every_s=0.1,
                               command=(*AS_NOBODY, "env", str(nobody_python.pyspy)))
        problem = sampler.check(spinner.pid)
        assert problem is not None and problem.kind == "permission" and str(spinner.pid) in problem.message
        assert "CAP_SYS_PTRACE" in problem.message and "ptrace_scope" in problem.message
        assert sampler.enabled
        batch = sample_until(sampler, own.pid, "spin")
        assert {pid for _, pid, *_ in batch.rows} == {own.pid}
        assert sampler.take_problems() == []  # check() already named the refused pid: not again
    finally:
        own.kill()
        own.wait()
        assert own.stderr is not None
        own.stderr.close()


@needs_pyspy
def test_a_pid_refused_while_sampling_is_named_once(spinner: subprocess.Popen[bytes],
                                                   nobody_python: NobodyPython) -> None:
    assert nobody_python.pyspy is not None
    nobody = (*AS_NOBODY, "env", str(nobody_python.pyspy))
    other = subprocess.Popen([sys.executable, str(TARGETS / "spin.py"), "60"], stdout=subprocess.DEVNULL)
    third = subprocess.Popen([sys.executable, str(TARGETS / "spin.py"), "60"], stdout=subprocess.DEVNULL)
    try:
        pids = {spinner.pid, other.pid, third.pid}
        sampler = StackSampler(lambda: pids, roots=lambda: pids, every_s=0.1, command=nobody)
        for attempt in range(3):
            assert sampler.sample(attempt * 10**9).rows == []
        first, rest = sampler.take_problems()
        assert first.kind == "permission" and first.pid == min(pids) and "CAP_SYS_PTRACE" in first.message
        assert rest.message.startswith("py-spy was refused 2 more pids for the same reason: ")
        assert all(str(pid) in rest.message for pid in pids - {min(pids)})
        assert sampler.take_problems() == []  # each named once
        assert sampler.enabled  # a process that appears later may still be readable
    finally:
        for proc in (other, third):
            proc.kill()
            proc.wait()


def test_missing_pyspy_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(st, "find_pyspy", lambda: None)
    sampler = StackSampler(lambda: {os.getpid()})
    assert not sampler.enabled
    (problem,) = sampler.take_problems()
    assert problem.kind == "missing" and "gpuscope[stacks]" in problem.message
    assert sampler.sample(0).rows == []


def test_a_pyspy_that_cannot_start_disables_stacks(tmp_path: Path) -> None:
    sampler = StackSampler(lambda: {os.getpid()}, command=(str(tmp_path / "no-such-py-spy"),))
    assert sampler.sample(0).rows == []
    assert not sampler.enabled
    assert [p.kind for p in sampler.take_problems()] == ["missing"]


# -- pure rules --------------------------------------------------------------------------------

def test_py_spy_errors_become_one_actionable_line() -> None:
    perm = classify_error(7, "Permission Denied: Try running again with elevated permissions by going 'sudo ...'")
    assert perm.kind == "permission" and "kernel.yama.ptrace_scope" in perm.message and "\n" not in perm.message
    assert classify_error(7, "Error: Failed to find python version from target process\n\nStack backtrace:\n"
                             "   0: anyhow").kind == "not_python"
    assert classify_error(7, "Error: Failed to get process executable name. Check that the process is running."
                          ).kind == "gone"
    other = classify_error(7, "\nError: something new\nmore")
    assert other.kind == "other" and other.message == "py-spy failed on pid 7: something new"


def test_frames_outermost_first_with_the_blocking_call_of_the_line(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def step(loss):\n    return loss.item()\n")
    dump = [{"name": "step", "filename": str(script), "short_filename": "train.py", "line": 2},
            {"name": "<module>", "filename": str(script), "short_filename": "train.py", "line": 9}]
    assert stack_frames(dump) == ("<module> (train.py:9)", "step (train.py:2)", "Tensor.item (<native>:0)")
    assert stack_frames([{"name": "f", "filename": "<string>", "line": 1}]) == ("f (<string>:1)",)
    assert stack_frames([]) == ()


def test_a_non_blocking_copy_is_launching_work_not_a_sync(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def step(x):\n    x = x.to('cuda', non_blocking=True)\n    return x.to('cpu')\n")

    def frames(line: int) -> tuple[str, ...]:
        return stack_frames([{"name": "step", "filename": str(script), "short_filename": "train.py", "line": line}])

    assert frames(2)[-1] == "Tensor.to(non_blocking) (<native>:0)"
    assert classify_main(frames(2), "active") == "launch"
    assert frames(3)[-1] == "Tensor.to (<native>:0)"
    assert classify_main(frames(3), "active") == "sync"


@pytest.mark.parametrize(("frames", "state", "want"), [
    (("main (t.py:1)", "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:725)",
      "Queue.get (multiprocessing/queues.py:113)"), "idle", "dataloader"),
    (("main (t.py:1)", "_SingleProcessDataLoaderIter._next_data (torch/utils/data/dataloader.py:790)",
      "Images.__getitem__ (data.py:3)"), "active", "dataloader"),
    (("main (t.py:1)", "all_reduce (torch/distributed/distributed_c10d.py:2800)"), "idle", "nccl"),
    (("main (t.py:1)", "barrier (torch/distributed/distributed_c10d.py:4100)"), "active", "nccl"),
    (("main (t.py:1)", "Tensor.item (<native>:0)"), "active", "sync"),
    (("main (t.py:1)", "synchronize (torch/cuda/__init__.py:1040)"), "idle", "sync"),
    (("main (t.py:1)", "Module._call_impl (torch/nn/modules/module.py:1750)", "Tensor.item (<native>:0)"),
     "active", "sync"),
    (("main (t.py:1)", "Module._call_impl (torch/nn/modules/module.py:1750)"), "active", "launch"),
    (("main (t.py:1)", "backward (torch/autograd/__init__.py:353)"), "idle", "launch"),
    (("main (t.py:1)", "Tensor.backward (<native>:0)"), "active", "launch"),
    (("main (t.py:1)", "log (t.py:9)"), "active", "python"),
    (("main (t.py:1)", "sleep (t.py:9)"), "idle", "idle"),
    (("<module> (t.py:1)", "_find_and_load (<frozen importlib._bootstrap>:1176)",
      "<module> (torch/__init__.py:2000)"), "active", "startup"),
])
def test_main_thread_activity(frames: tuple[str, ...], state: str, want: str) -> None:
    assert classify_main(frames, state) == want


def test_worker_activity() -> None:
    fetching = ("_worker_loop (torch/utils/data/_utils/worker.py:351)",
                "_MapDatasetFetcher.fetch (torch/utils/data/_utils/fetch.py:54)", "Images.__getitem__ (data.py:20)")
    waiting = ("_worker_loop (torch/utils/data/_utils/worker.py:320)", "Queue.get (multiprocessing/queues.py:113)")
    assert is_loader_worker(fetching) and is_loader_worker(waiting)
    assert not is_loader_worker(("main (t.py:1)",))
    assert classify_worker(fetching, "active") == "cpu"
    assert classify_worker(fetching, "idle") == "io"
    assert classify_worker(waiting, "disk") == "io"
    assert classify_worker(waiting, "idle") == "idle"


FAKE_PYSPY = """
import json, sys
pid = int(sys.argv[sys.argv.index("--pid") + 1])
print(json.dumps([{"os_thread_id": pid, "active": True,
                   "frames": [{"name": "work", "filename": "w.py", "short_filename": "w.py", "line": pid}]}]))
"""


def test_the_target_every_time_and_its_children_in_turn(tmp_path: Path) -> None:
    fake = tmp_path / "fake_pyspy.py"
    fake.write_text(FAKE_PYSPY)
    tree = {10, 11, 12, 13, 14}
    sampler = StackSampler(lambda: tree, root=10, every_s=1.0, max_children=2, command=(sys.executable, str(fake)),
                           proc_root=tmp_path)
    dumped = [sorted({pid for _, pid, *_ in sampler.sample(i * 10**9).rows}) for i in range(4)]
    assert dumped == [[10, 11, 12], [10, 13, 14], [10, 11, 12], [10, 13, 14]]
    small = StackSampler(lambda: {10, 11}, root=10, max_children=2, command=(sys.executable, str(fake)),
                         proc_root=tmp_path)
    assert sorted({pid for _, pid, *_ in small.sample(0).rows}) == [10, 11]


def test_every_trainer_each_tick_up_to_a_few_and_the_dumps_are_heard(tmp_path: Path) -> None:
    fake = tmp_path / "fake_pyspy.py"
    fake.write_text(FAKE_PYSPY)
    heard: list[int] = []
    trainers = {20, 21}
    sampler = StackSampler(lambda: {10, 20, 21, 30}, roots=lambda: trainers, every_s=1.0, max_children=1,
                           command=(sys.executable, str(fake)), proc_root=tmp_path,
                           on_dump=lambda pid, stacks: heard.append(pid) if stacks else None)
    dumped = [sorted({pid for _, pid, *_ in sampler.sample(i * 10**9).rows}) for i in range(2)]
    assert dumped == [[10, 20, 21], [20, 21, 30]]  # both trainers each time, the launcher and worker in turn
    assert sorted(heard) == [10, 20, 20, 21, 21, 30]
    trainers = set(range(40, 46))
    many = StackSampler(lambda: trainers, roots=lambda: trainers, every_s=1.0, command=(sys.executable, str(fake)),
                        proc_root=tmp_path)
    first, second = ({pid for _, pid, *_ in many.sample(i * 10**9).rows} for i in range(2))
    assert len(first) == st.MAX_ROOTS and first | second == trainers
