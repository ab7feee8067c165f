"""Which process trains, loads data, launches or helps: the rules on process trees built in code."""

from __future__ import annotations

import os
from unittest.mock import create_autospec

import psutil

from gpuscope.collectors.roles import ProcFacts, RoleTracker, assign_roles, facts_from_argv, stack_hint

PY = "/venv/bin/python3"
TRAIN = (PY, "train.py", "--lr", "0.1")


def tree(*procs: tuple[int, int, tuple[str, ...], dict[str, str]]) -> dict[int, ProcFacts]:
    return {pid: facts_from_argv(pid, ppid, argv, environ=env) for pid, ppid, argv, env in procs}


def test_torchrun_agent_launches_and_its_children_train_with_their_ranks() -> None:
    facts = tree((1, 0, (PY, "/venv/bin/torchrun", "--nproc-per-node=2", "train.py"), {}),
                 (2, 1, (PY, "-u", "train.py"), {"RANK": "0"}), (3, 1, (PY, "-u", "train.py"), {"RANK": "1"}),
                 (4, 2, (PY, "-u", "train.py"), {"RANK": "0"}),  # rank 0's forked DataLoader worker
                 (5, 3, ("/usr/bin/wandb-core", "--port", "0"), {}))  # rank 1's logging service
    roles = assign_roles(facts, 1)
    assert roles == {1: "launcher", 2: "trainer", 3: "trainer", 4: "loader_worker", 5: "helper"}
    assert facts[2].rank == 0 and facts[3].rank == 1


def test_launchers_and_wrappers_by_command_line() -> None:
    for argv in (("bash", "-c", "python train.py; true"), ("timeout", "3600", "python", "train.py"),
                 (PY, "-m", "torch.distributed.run", "train.py"), (PY, "/venv/bin/accelerate", "launch", "t.py"),
                 (PY, "-u", "-m", "deepspeed.launcher.launch", "--world_info=x"), ("srun", "-n2", "python"),
                 ("mpirun", "-np", "2", "python", "t.py"), ("/usr/bin/env", "python", "t.py")):
        assert facts_from_argv(1, 0, argv).launcher, argv
    for argv in ((PY, "train.py"), (PY, "-m", "mypkg.train"), ("./trainer_binary",), (PY, "-c", "import x")):
        assert not facts_from_argv(1, 0, argv).launcher, argv


def test_a_shell_child_trains_and_a_lone_launcher_never_becomes_the_trainer() -> None:
    facts = tree((1, 0, ("bash", "-c", "python train.py; true"), {}), (2, 1, TRAIN, {}))
    assert assign_roles(facts, 1) == {1: "launcher", 2: "trainer"}
    alone = tree((1, 0, (PY, "/venv/bin/torchrun", "train.py"), {}))  # its trainers exited, or not yet started
    assert assign_roles(alone, 1) == {1: "launcher"}
    native = tree((1, 0, ("./simulate",), {}))
    assert assign_roles(native, 1) == {1: "trainer"}


def test_children_of_a_trainer_are_workers_only_when_they_look_like_loader_workers() -> None:
    spawn = (PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
             "--multiprocessing-fork")
    facts = tree((1, 0, TRAIN, {}), (2, 1, TRAIN, {}), (3, 1, spawn, {}),
                 (4, 1, (PY, "-c", "from multiprocessing.resource_tracker import main;main(6)"), {}),
                 (5, 1, (PY, "-m", "torch._inductor.compile_worker", "--workers=4"), {}), (6, 5, TRAIN, {}))
    roles = assign_roles(facts, 1)
    assert roles == {1: "trainer", 2: "loader_worker", 3: "loader_worker", 4: "helper", 5: "helper", 6: "helper"}
    # A forked child whose stacks never run torch's worker loop (a tokenizer pool, say) is a helper.
    hinted = assign_roles(facts, 1, hints={2: "other", 3: "loader_worker"})
    assert hinted[2] == "helper" and hinted[3] == "loader_worker"


def test_gpu_contexts_decide_who_trains() -> None:
    # mp.spawn from a script: the parent holds no GPU, its spawned children do.
    spawn = (PY, "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork")
    facts = tree((1, 0, TRAIN, {}), (2, 1, spawn, {}), (3, 1, spawn, {}), (4, 2, spawn, {}))
    assert assign_roles(facts, 1, gpu_pids={2, 3}) == {
        1: "launcher", 2: "trainer", 3: "trainer", 4: "loader_worker"}
    # Without a GPU, children with a rank under a parent without one say the same.
    ranked = tree((1, 0, TRAIN, {}), (2, 1, spawn, {"RANK": "0"}), (3, 1, spawn, {"RANK": "1"}))
    assert assign_roles(ranked, 1) == {1: "launcher", 2: "trainer", 3: "trainer"}


def test_stack_hints() -> None:
    worker = ("_bootstrap (multiprocessing/process.py:314)", "run (multiprocessing/process.py:108)",
              "_worker_loop (torch/utils/data/_utils/worker.py:309)")
    agent = ("main (torch/distributed/run.py:919)", "_invoke_run (torch/distributed/elastic/agent/server/api.py:8)")
    record = ("wrapper (torch/distributed/elastic/multiprocessing/errors/__init__.py:355)", "main (train.py:40)")
    assert stack_hint([worker]) == "loader_worker"
    assert stack_hint([agent]) == "launcher"
    assert stack_hint([record]) == "other"  # trainers run under torchrun's @record decorator
    assert stack_hint([]) is None
    tracker = RoleTracker()
    tracker.note_stacks(7, [record])
    assert tracker._hints == {}  # one dump without the worker loop may be a worker still starting
    tracker.note_stacks(7, [record])
    assert tracker._hints == {7: "other"}
    tracker.note_stacks(8, [worker])
    tracker.note_stacks(8, [record])
    assert tracker._hints[8] == "loader_worker"  # decisive evidence is kept



def live(pid: int, ppid: int, argv: tuple[str, ...], env: dict[str, str]) -> psutil.Process:
    proc = create_autospec(psutil.Process, instance=True)
    proc.pid = pid
    proc.ppid.return_value, proc.cmdline.return_value, proc.environ.return_value = ppid, list(argv), env
    proc.name.return_value = os.path.basename(argv[0])
    return proc


def test_a_trainer_exiting_keeps_its_role_and_rank() -> None:
    agent = live(1, 0, (PY, "/venv/bin/torchrun", "--nproc-per-node=1", "train.py"), {})
    trainer = live(2, 1, (PY, "-u", "train.py"), {"RANK": "1"})
    worker = live(3, 2, (PY, "-u", "train.py"), {"RANK": "1"})  # forked: the trainer's environment
    tracker = RoleTracker()
    expected = {1: "launcher", 2: "trainer", 3: "loader_worker"}
    assert tracker.update([agent, trainer, worker], 1) == expected and tracker.rank(2) == 1
    # Exiting, its memory released and its children not yet handed on: an empty command line and environment.
    trainer.cmdline.return_value, trainer.environ.return_value = [], {}
    assert tracker.update([agent, trainer, worker], 1) == expected and tracker.rank(2) == 1
