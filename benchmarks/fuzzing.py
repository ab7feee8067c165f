"""The runner the fuzzers share (``fuzz_readers.py``, ``fuzz_http_readers.py``): inputs of one reader run in a worker
process under an address-space limit, each ending as a result, a user error, a crash or a hang; the outcomes tallied,
kept as JSON state a stopped run resumes from, and printed as a markdown table.

A fuzzer brings what is its own: a ``Session`` (set up in the worker, it gives the outcome of input i), its ``Tally``
(which says how a user error is keyed), and its command line's ``--readers`` and ``--show``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TypeVar

OUTCOMES = ("result", "user_error", "crash", "hang")

T = TypeVar("T", bound="Tally")
RunOne = Callable[[int], tuple[str, str]]
"""The outcome and one line of input i."""
Session = Callable[[str, int], AbstractContextManager[RunOne]]
"""Given (reader, seed), in the worker process: what runs one input there, for as long as the worker lives."""


@dataclass
class Tally:
    next: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    failures: list[dict[str, Any]] = field(default_factory=list)
    """Crashes and hangs: index and one line each (the first 50)."""
    errors: dict[str, int] = field(default_factory=dict)
    """How many user errors began with each of their first words (which checks the inputs met)."""
    rss_mib: list[float] = field(default_factory=list)
    """The worker's resident memory after input 100 and at the end of each stretch."""
    peak_rss_mib: float = 0.0
    seconds: float = 0.0

    def add(self, index: int, outcome: str, line: str) -> None:
        self.counts[outcome] += 1
        self.next = index + 1
        if outcome in ("crash", "hang") and len(self.failures) < 50:
            self.failures.append({"index": index, "outcome": outcome, "line": line})
        if outcome == "user_error":
            key = self.error_key(line)
            self.errors[key] = self.errors.get(key, 0) + 1

    def timed(self, outcome: str, seconds: float) -> None:
        """How long one input took (kept by a tally that reports it)."""

    @staticmethod
    def error_key(line: str) -> str:
        """A user error's kind, without the paths, addresses and values in it (each fuzzer's own)."""
        raise NotImplementedError


def crash_line(exc: BaseException) -> str:
    """An exception as one line: its type, message (cut at 300 characters) and the file and line it came from."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{where}"


def cli_failure(result: Any) -> tuple[str, str] | None:
    """The outcome of a command run by typer's ``CliRunner`` that ended in an exception or a traceback, as
    ``gpuscope.cli.main.main`` would end it; None where it ended by its exit code alone."""
    from gpuscope.api.errors import GpuscopeError
    from gpuscope.store import StoreError
    from gpuscope.traces import TraceError

    exc = result.exception
    if isinstance(exc, GpuscopeError | TraceError | StoreError):  # main() prints these as one line
        return ("user_error", str(exc)) if "\n" not in str(exc) else ("crash", f"a message of several lines: {exc!r}")
    if exc is not None and not isinstance(exc, SystemExit):
        return "crash", crash_line(exc)
    if "Traceback" in result.stderr:
        return "crash", result.stderr.strip().splitlines()[-1]
    return None


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _serve(conn: Connection, other_end: Connection, session: Session, reader: str, seed: int,
           memory_gib: float) -> None:
    other_end.close()  # the parent's end: closed here, so the parent's death is an EOF, not a wait forever
    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    with session(reader, seed) as run_one:
        conn.send("ready")  # set up: the inputs' time bound starts only now
        while True:
            index = conn.recv()
            outcome, line = run_one(index)
            conn.send((outcome, line, rss_bytes()))


START_S = 300.0
"""How long a worker may take to start and set its session up."""


class Worker:
    """A worker process for one reader; ``run`` gives the outcome of one input or kills it past the bound."""

    def __init__(self, session: Session, reader: str, seed: int, memory_gib: float) -> None:
        self.args = (session, reader, seed, memory_gib)
        self.proc: multiprocessing.Process | None = None

    def _start(self) -> None:
        # forkserver, not fork: the caller may have threads (a test process that ran Dask or fsspec before), and a
        # child forked while another thread holds a lock (the import lock, logging's) waits on it forever. So the
        # session is importable by name, and what the worker needs it sets up itself.
        context = multiprocessing.get_context("forkserver")
        parent, child = context.Pipe()
        self.proc = context.Process(target=_serve, args=(child, parent, *self.args), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent
        # A worker's start (a fresh interpreter, the session's imports) is not an input's time: on a busy machine it
        # can take longer than the bound. It gets a bound of its own, generous, and counts against no input.
        if not parent.poll(START_S) or parent.recv() != "ready":
            self.stop()
            raise RuntimeError(f"the fuzzing worker did not start within {START_S:.0f} s")

    def run(self, index: int, bound_s: float) -> tuple[str, str, int]:
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(index)
        try:
            if self.conn.poll(bound_s):
                return self.conn.recv()  # type: ignore[no-any-return]
            self.stop()
            return "hang", f"no outcome after {bound_s:.0f} s", 0
        except EOFError:
            code = self.proc.exitcode if self.proc else None
            self.stop()
            return "crash", f"the worker process died (exit {code})", 0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.proc = None


def fuzz(reader: str, session: Session, tally: T, *, count: int, seed: int, bound_s: float = 60.0,
         memory_gib: float = 4.0, save: Callable[[], None] | None = None) -> T:
    """Run inputs ``tally.next`` to ``count - 1`` of ``reader`` in a worker process that ``session`` sets up;
    the tally, updated."""
    worker = Worker(session, reader, seed, memory_gib)
    start = time.monotonic()
    rss = 0
    try:
        for index in range(tally.next, count):
            began = time.monotonic()
            outcome, line, rss = worker.run(index, bound_s)
            tally.timed(outcome, time.monotonic() - began)
            tally.add(index, outcome, line)
            tally.peak_rss_mib = max(tally.peak_rss_mib, rss / 2**20)
            if index == 100:
                tally.rss_mib.append(rss / 2**20)
            if save is not None and index % 50 == 49:
                tally.seconds += time.monotonic() - start
                start = time.monotonic()
                save()
        if tally.next == count and rss:
            tally.rss_mib.append(rss / 2**20)
    finally:
        worker.stop()
        tally.seconds += time.monotonic() - start
    return tally


def table(state: dict[str, Any], *, slowest: bool = False) -> str:
    """The state's tallies as a markdown table, one row a reader (with the slowest input's seconds if asked)."""
    rows = ["| reader | inputs | results | user errors | crashes | hangs | worker RSS after 100 / at end / peak "
            "| s per input |" + (" slowest s |" if slowest else ""), "|---|---|---|---|---|---|---|---|"
            + ("---|" if slowest else "")]
    for name, t in state["readers"].items():
        c, n = t["counts"], t["next"]
        rss = " / ".join(f"{v:.0f}" for v in t["rss_mib"]) or "-"
        rows.append(f"| {name} | {n:,} | {c['result']:,} | {c['user_error']:,} | {c['crash']} | {c['hang']} | "
                    f"{rss} / {t['peak_rss_mib']:.0f} MiB | {t['seconds'] / max(n, 1):.3f} |"
                    + (f" {t.get('slowest_s', 0):.2f} |" if slowest else ""))
    return "\n".join(rows)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run: how many inputs, the seed, the state file, the time bound and the memory limit."""
    parser.add_argument("--count", type=int, default=10_000, help="Inputs per reader (default 10,000).")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--state", type=Path, help="Counts and progress, kept as JSON; a run resumes from it.")
    parser.add_argument("--time-bound-s", type=float, default=60.0, help="An input running longer is a hang.")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="The worker's address-space limit.")


def _save(state: dict[str, Any], path: Path | None, name: str, tally: Tally) -> None:
    state["readers"][name] = tally.__dict__
    if path:
        path.write_text(json.dumps(state, indent=1))


def run(args: argparse.Namespace, session: Session, new_tally: type[Tally], *, slowest: bool = False) -> None:
    """Each of ``args.readers`` to ``args.count`` inputs, resumed from and saved to ``args.state``; the table."""
    state: dict[str, Any] = {"seed": args.seed, "readers": {}}
    if args.state and args.state.exists():
        state = json.loads(args.state.read_text())
        assert state["seed"] == args.seed, f"{args.state} was made with seed {state['seed']}"
    for name in args.readers.split(","):
        tally = new_tally(**state["readers"].get(name, {}))
        save = partial(_save, state, args.state, name, tally)
        fuzz(name, session, tally, count=args.count, seed=args.seed, bound_s=args.time_bound_s,
             memory_gib=args.memory_gib, save=save)
        save()
        print(f"{name}: {tally.counts} in {tally.seconds:.0f} s", flush=True)
    print(table(state, slowest=slowest))
