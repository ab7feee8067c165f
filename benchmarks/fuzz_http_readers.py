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
import os
import random
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_http_inputs as fi  # noqa: E402 - a sibling script, not a package
import fuzzing  # noqa: E402

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

    from gpuscope.cli.main import app

    server.case = case
    result = CliRunner().invoke(app, ["fleet", "--prometheus", server.url, "--timeout", "20", *case.args],
                                env={"COLUMNS": "100", "GPUSCOPE_HOME": str(home)})
    failed = fuzzing.cli_failure(result)
    if failed is not None:
        return failed
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


def _run_one(reader: str, seed: int, server: Server, home: Path, index: int) -> tuple[str, str]:
    try:
        case = make_case(reader, seed, index)
        return run_dcgm(case, server) if reader == "dcgm" else run_prometheus(case, server, home)
    except Exception as exc:  # noqa: BLE001 - the reader let an exception out: the crash being counted
        return "crash", fuzzing.crash_line(exc)


@contextmanager
def _session(reader: str, seed: int) -> Iterator[fuzzing.RunOne]:
    """In the worker: the loopback server and an empty home, kept for every input."""
    server = Server()
    home = Path(tempfile.mkdtemp(prefix="gpuscope-fuzz-http-"))
    os.environ["GPUSCOPE_HOME"] = str(home)  # no price setting of this machine's user
    try:
        yield partial(_run_one, reader, seed, server, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- the run -------------------------------------------------------------------------------------------


@dataclass
class Tally(fuzzing.Tally):
    slowest_s: float = 0.0
    """The longest one input took (a hang is counted apart)."""

    def timed(self, outcome: str, seconds: float) -> None:
        if outcome != "hang":
            self.slowest_s = max(self.slowest_s, seconds)

    @staticmethod
    def error_key(line: str) -> str:
        """A user error's kind, without the addresses and values in it."""
        text = re.sub(r"https?://\S+", "URL", line.removeprefix("gpuscope: error: "))
        text = re.sub(r"\(b?'.*", "(...)", text)
        return " ".join(text.split()[:7])[:80]


def fuzz(reader: str, *, tally: Tally | None = None, **options: Any) -> Tally:
    """Run inputs ``tally.next`` to ``count - 1`` of ``reader`` (options: ``fuzzing.fuzz``'s); the tally, updated."""
    return fuzzing.fuzz(reader, _session, tally or Tally(), **options)


table = partial(fuzzing.table, slowest=True)


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
    fuzzing.add_run_options(parser)
    parser.add_argument("--show", metavar="READER:INDEX", help="Write one input's bodies to ./fuzz-case and exit.")
    args = parser.parse_args()
    if args.show:
        reader, index = args.show.split(":")
        print("\n".join(str(p) for p in show(reader, args.seed, int(index), Path("fuzz-case"))))
        return
    fuzzing.run(args, _session, Tally, slowest=True)


if __name__ == "__main__":
    main()
