"""Fuzz gpuscope's readers of HTTP peers: thousands of odd and broken answers each, counted by what happened.

Readers (each input is served by a real HTTP server on 127.0.0.1 and read by gpuscope's real client):

- ``dcgm``: a dcgm-exporter scrape (``fuzz_http_inputs.dcgm_scrape``, sometimes gzip-encoded) through
  ``DcgmSampler.sample``, as every tick of ``gpuscope attach --dcgm`` reads one;
- ``prometheus``: Prometheus ``/api/v1/query_range`` answers (``fuzz_http_inputs.prometheus_answer`` for the
  utilisation query, and for the others an empty matrix or another generated answer) through the real
  ``gpuscope fleet --json`` or its terminal view, in-process (typer's runner plus the one-line handling of
  ``gpuscope.cli.main``), saving into a store.

Each input ends as a **result** (samples, or exit 0), a **user error** (a gap with its one-line reason for
``dcgm``; exit 2 and one line on stderr for ``prometheus``), a **crash** (any other exception, a message of several
lines, or a result that breaks the readers' promises: a share outside 0..1, a negative or non-finite value, a DCGM
sentinel recorded as a value), or a **hang** (past ``--time-bound-s``: the worker process is killed and a new one
takes the next input). Inputs run in a worker process under an address-space limit (``--memory-gib``), so memory
growing without bound ends as a crash, not a stuck machine; the worker's resident memory is sampled after each input.

Input i of reader R under seed S is made from ``random.Random(f"{S}:{R}:{i}")`` alone: ``--state FILE`` keeps
the counts and where each reader got to, and a run stopped part way resumes there; ``--show R:i`` writes one
input out. The same options, state and table as ``fuzz_readers.py``.

    .venv/bin/python benchmarks/fuzz_http_readers.py --count 10000 --state /tmp/fuzz-http-state.json
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_http_inputs as fi  # noqa: E402 - a sibling script, not a package

OUTCOMES = ("result", "user_error", "crash", "hang")
NOW_NS = 1_800_000_000_000_000_000
_FRACTIONS = {"gpu.util", "gpu.mem_util", "gpu.sm_active", "gpu.sm_occupancy", "gpu.tensor_active",
              "gpu.dram_active", "gpu.gr_engine_active"}


@dataclass(frozen=True)
class Case:
    """One input: the body served for each request (by a word of the query; "" for every other one), its headers,
    and the arguments of the fleet command (for ``prometheus``)."""

    bodies: dict[str, tuple[bytes, dict[str, str]]]
    args: tuple[str, ...] = ()


def _dcgm_case(rng: random.Random) -> Case:
    return Case({"": fi.content_encoding(rng, fi.dcgm_scrape(rng))})


def _prometheus_case(rng: random.Random) -> Case:
    bodies = {"GPU_UTIL": fi.content_encoding(rng, fi.prometheus_answer(rng))}
    for word in ("GR_ENGINE", "SM_ACTIVE", "FB_USED", "POWER_USAGE", "ENERGY", "DRAM"):
        if rng.random() < 0.3:  # another metric's answer: generated, and changed less often
            answer = fi.prometheus_answer(rng) if rng.random() < 0.2 else fi.dumps(fi.generated_answer(rng))
            bodies[word] = fi.content_encoding(rng, answer)
    bodies[""] = (fi.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}), {})
    start_s, end_s, step_s = fi.WINDOW_S
    args = ("--start", f"{start_s:g}", "--end", f"{end_s:g}", "--step", f"{step_s:g}s",
            "--group-by", rng.choice(["pod", "namespace", "job", "host", "gpu", "label=modelname"]))
    return Case(bodies, args + (("--json",) if rng.random() < 0.5 else ()))


@dataclass(frozen=True)
class Reader:
    name: str
    make: Callable[[random.Random], Case]
    what: str


READERS: dict[str, Reader] = {r.name: r for r in (
    Reader("dcgm", _dcgm_case, "dcgm-exporter scrapes, recorded or generated, mutated (through DcgmSampler)"),
    Reader("prometheus", _prometheus_case, "query_range answers, generated and mutated (through gpuscope fleet)"),
)}


def make_case(reader: str, seed: int, index: int) -> Case:
    return READERS[reader].make(random.Random(f"{seed}:{reader}:{index}"))


# -- the loopback server -----------------------------------------------------------------------------


class Server:
    """Serves the current case: each request gets the body of the first word its query holds."""

    def __init__(self) -> None:
        self.case = Case({"": (b"", {})})
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                query = self.rfile.read(length).decode("latin-1") if length else ""
                word = next((w for w in server.case.bodies if w and w in query), "")
                body, headers = server.case.bodies[word]
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's spelling

            def log_message(self, *args: object) -> None:
                pass

        class Quiet(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that hung up early (an answer too large, say): what it may do

        self.http = Quiet(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


# -- one input, in-process ---------------------------------------------------------------------------


def run_dcgm(case: Case, server: Server) -> tuple[str, str]:
    from gpuscope.collectors.dcgm import DcgmSampler

    server.case = case
    sampler = DcgmSampler(server.url, timeout_s=20.0)
    rows = sampler.sample(NOW_NS)
    if not rows and sampler.last_error is not None:  # a gap, and why
        line = sampler.last_error
        return ("user_error", line) if "\n" not in line else ("crash", f"a reason of several lines: {line!r}")
    for _ts, _source, gpu, _pid, metric, value in rows:
        wrong = (not math.isfinite(value) or value < 0 or (metric in _FRACTIONS and value > 1)
                 or value >= 0x7FFFFFFFFFFFFFF0 or gpu < 0)
        if wrong:
            return "crash", f"invalid result: gpu {gpu} {metric} = {value!r}"
    return "result", ""


def run_prometheus(case: Case, server: Server, home: Path) -> tuple[str, str]:
    from typer.testing import CliRunner

    from gpuscope.api.errors import GpuscopeError
    from gpuscope.cli.main import app
    from gpuscope.store import StoreError
    from gpuscope.traces import TraceError

    server.case = case
    result = CliRunner().invoke(app, ["fleet", "--prometheus", server.url, "--timeout", "20", *case.args],
                                env={"COLUMNS": "100", "GPUSCOPE_HOME": str(home)})
    exc = result.exception
    if isinstance(exc, GpuscopeError | TraceError | StoreError):  # main() prints these as one line
        return ("user_error", str(exc)) if "\n" not in str(exc) else ("crash", f"a message of several lines: {exc!r}")
    if exc is not None and not isinstance(exc, SystemExit):
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        return "crash", f"{type(exc).__name__}: {str(exc)[:300]}{where}"
    if "Traceback" in result.stderr:
        return "crash", result.stderr.strip().splitlines()[-1]
    if result.exit_code == 0:
        return _check_report(result.stdout) if "--json" in case.args else ("result", "")
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    if len(lines) != 1:
        return "crash", f"exit {result.exit_code} with {len(lines)} lines on stderr: {lines[-1:]!r}"
    return "user_error", lines[0]


def _check_report(stdout: str) -> tuple[str, str]:
    report = json.loads(stdout)
    for group in report["groups"]:
        busy = group.get("busy")
        if busy is not None and not 0 <= busy <= 1:
            return "crash", f"invalid result: group busy {busy!r}"
        for key in ("gpu_hours", "cost_usd", "wasted_usd"):
            value = group.get(key)
            if value is not None and (not math.isfinite(value) or value < 0):
                return "crash", f"invalid result: group {key} {value!r}"
    return "result", ""


def _worker(conn: Connection, reader: str, seed: int, memory_gib: float) -> None:
    limit = int(memory_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    server = Server()
    home = Path(tempfile.mkdtemp(prefix="gpuscope-fuzz-http-"))
    os.environ["GPUSCOPE_HOME"] = str(home)  # no price setting of this machine's user
    try:
        while True:
            index = conn.recv()
            try:
                case = make_case(reader, seed, index)
                outcome, line = run_dcgm(case, server) if reader == "dcgm" else run_prometheus(case, server, home)
            except Exception as exc:  # noqa: BLE001 - the reader let an exception out: the crash being counted
                frames = traceback.extract_tb(exc.__traceback__)
                where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
                outcome, line = "crash", f"{type(exc).__name__}: {str(exc)[:300]}{where}"
            conn.send((outcome, line, _rss_bytes()))
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- the run -------------------------------------------------------------------------------------------


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
    slowest_s: float = 0.0
    """The longest one input took (a hang is counted apart)."""

    def add(self, index: int, outcome: str, line: str) -> None:
        self.counts[outcome] += 1
        self.next = index + 1
        if outcome in ("crash", "hang") and len(self.failures) < 50:
            self.failures.append({"index": index, "outcome": outcome, "line": line})
        if outcome == "user_error":
            key = _error_key(line)
            self.errors[key] = self.errors.get(key, 0) + 1


def _error_key(line: str) -> str:
    """A user error's kind, without the addresses and values in it."""
    text = re.sub(r"https?://\S+", "URL", line.removeprefix("gpuscope: error: "))
    text = re.sub(r"\(b?'.*", "(...)", text)
    return " ".join(text.split()[:7])[:80]


class Worker:
    """A worker process for one reader; ``run`` gives the outcome of one input or kills it past the bound."""

    def __init__(self, reader: str, seed: int, memory_gib: float) -> None:
        self.args = (reader, seed, memory_gib)
        self.proc: multiprocessing.Process | None = None

    def _start(self) -> None:
        parent, child = multiprocessing.get_context("fork").Pipe()
        self.proc = multiprocessing.get_context("fork").Process(target=_worker, args=(child, *self.args), daemon=True)
        self.proc.start()
        self.conn = parent

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


def fuzz(reader: str, *, count: int, seed: int, tally: Tally | None = None, bound_s: float = 60.0,
         memory_gib: float = 4.0, save: Callable[[], None] | None = None) -> Tally:
    """Run inputs ``tally.next`` to ``count - 1`` of ``reader``; the tally, updated."""
    tally = tally or Tally()
    worker = Worker(reader, seed, memory_gib)
    start = time.monotonic()
    rss = 0
    try:
        for index in range(tally.next, count):
            began = time.monotonic()
            outcome, line, rss = worker.run(index, bound_s)
            if outcome != "hang":
                tally.slowest_s = max(tally.slowest_s, time.monotonic() - began)
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


def table(state: dict[str, Any]) -> str:
    rows = ["| reader | inputs | results | user errors | crashes | hangs | worker RSS after 100 / at end / peak "
            "| s per input | slowest s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, t in state["readers"].items():
        c, n = t["counts"], t["next"]
        rss = " / ".join(f"{v:.0f}" for v in t["rss_mib"]) or "-"
        rows.append(f"| {name} | {n:,} | {c['result']:,} | {c['user_error']:,} | {c['crash']} | {c['hang']} | "
                    f"{rss} / {t['peak_rss_mib']:.0f} MiB | {t['seconds'] / max(n, 1):.3f} | "
                    f"{t.get('slowest_s', 0):.2f} |")
    return "\n".join(rows)


def show(reader: str, seed: int, index: int, out: Path) -> list[Path]:
    """Write one input's bodies to ``out`` (one file per query word); their paths."""
    out.mkdir(exist_ok=True)
    written = []
    for word, (body, headers) in make_case(reader, seed, index).bodies.items():
        path = out / f"{reader}-{index}-{word or 'other'}{'.gz' if headers else ''}"
        path.write_bytes(body)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", default=",".join(READERS))
    parser.add_argument("--count", type=int, default=10_000, help="Inputs per reader (default 10,000).")
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument("--state", type=Path, help="Counts and progress, kept as JSON; a run resumes from it.")
    parser.add_argument("--time-bound-s", type=float, default=60.0, help="An input running longer is a hang.")
    parser.add_argument("--memory-gib", type=float, default=4.0, help="The worker's address-space limit.")
    parser.add_argument("--show", metavar="READER:INDEX", help="Write one input's bodies to ./fuzz-case and exit.")
    args = parser.parse_args()
    if args.show:
        reader, index = args.show.split(":")
        print("\n".join(str(p) for p in show(reader, args.seed, int(index), Path("fuzz-case"))))
        return
    state: dict[str, Any] = {"seed": args.seed, "readers": {}}
    if args.state and args.state.exists():
        state = json.loads(args.state.read_text())
        assert state["seed"] == args.seed, f"{args.state} was made with seed {state['seed']}"

    def save() -> None:
        state["readers"][name] = tally.__dict__
        if args.state:
            args.state.write_text(json.dumps(state, indent=1))

    for name in args.readers.split(","):
        tally = Tally(**state["readers"].get(name, {}))
        fuzz(name, count=args.count, seed=args.seed, tally=tally, bound_s=args.time_bound_s,
             memory_gib=args.memory_gib, save=save)
        save()
        print(f"{name}: {tally.counts} in {tally.seconds:.0f} s", flush=True)
    print(table(state))


if __name__ == "__main__":
    main()
