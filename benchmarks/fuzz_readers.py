"""Fuzz gpuscope's readers of outside data: thousands of odd and broken inputs each, counted by what happened.

Readers (each input runs the real command in-process, as ``gpuscope`` would: typer's runner plus the one-line
handling of ``gpuscope.cli.main``):

- ``trace``, ``trace_gz``: a mutated copy of a small bundled trace (sample_traces/), as .json or .json.gz, through
  ``gpuscope analyze FILE --no-save`` (the terminal view or ``--json``, drawn);
- ``gate_config``: a mutated or generated gate config (TOML) through ``gpuscope gate A --baseline B --config FILE``;
- ``gate_baseline``: a mutated saved report (``analyze --json``, plain or gzipped) as the gate's ``--baseline``;
- ``prices``: a mutated config.toml, GPUSCOPE_USD_PER_GPU_HOUR, GPUSCOPE_GRID_KG_CO2_PER_KWH and
  ``--usd-per-gpu-hour`` through ``gpuscope analyze`` of a small trace and ``gpuscope prices --gpu``;
- ``copies`` (not run by default): mutated copies of one bundled trace, the DLRM sample's rank 0, as ``trace``.

Each input ends as a **result** (exit 0, or 1 for a gate's regression), a **user error** (exit 2 and one line on
stderr, no traceback), a **crash** (any other exception: a traceback in the real command), or a **hang** (past
``--time-bound-s``: the worker process is killed and a new one takes the next input). Inputs run in a worker process
under an address-space limit (``--memory-gib``), so memory growing without bound ends as a crash, not a stuck
machine; the worker's resident memory is sampled after every input.

Input i of reader R under seed S is made from ``random.Random(f"{S}:{R}:{i}")`` alone: ``--state FILE`` keeps
the counts and where each reader got to, and a run stopped part way resumes there; ``--show R:i`` writes one
input out. ``--copies N`` runs N mutated copies of one bundled trace through the real ``gpuscope analyze`` in
subprocesses (counting tracebacks and hangs as they would appear to a user).

    .venv/bin/python benchmarks/fuzz_readers.py --count 10000 --state /tmp/fuzz-state.json
    .venv/bin/python benchmarks/fuzz_readers.py --copies 300
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_inputs as fi  # noqa: E402 - a sibling script, not a package
import fuzz_stores as fs  # noqa: E402
import fuzzing  # noqa: E402

TRACE_CAP_GIB = 1 / 32
"""GPUSCOPE_MAX_TRACE_GIB in the worker: 32 MiB, so the padded inputs that inflate past it (to 48 MiB) are
stopped there quickly, as a 2 GiB one would be at the default cap."""


@dataclass(frozen=True)
class Case:
    """One input: files written into a fresh folder, environment variables, and the command's arguments
    (``{dir}`` stands for the folder)."""

    files: dict[str, bytes]
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reader:
    name: str
    make: Callable[[random.Random], Case]
    what: str


def _trace_case(rng: random.Random, *, gz: bool | None, base: str | None = None) -> Case:
    name, data = fi.mutated_trace(rng, gz=gz, base=base)
    return Case({name: data}, ("analyze", f"{{dir}}/{name}", "--no-save", *(["--json"] if rng.random() < 0.5 else [])))


@cache
def _fixtures() -> dict[str, bytes]:
    """A small clean trace and the saved report of another, for the gate and price readers."""
    from gpuscope.api.analysis import analyze
    from gpuscope.model.codec import to_json

    trace = fi.sample_text("dev/event_sync_multi_stream.json.gz")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.json"
        path.write_bytes(fi.sample_text("torch_compile_cpu/first_call.json.gz"))
        report = to_json(analyze(path).analysis)
    return {"trace": trace, "report": report}


def _gate_config_case(rng: random.Random) -> Case:
    fx = _fixtures()
    files = {"cand.json": fx["report"], "base.json": fx["report"], "gate.toml": fi.mutated_toml(rng, fi.GATE_CONFIG)}
    return Case(files, ("gate", "{dir}/cand.json", "--baseline", "{dir}/base.json", "--config", "{dir}/gate.toml",
                        *(["--json"] if rng.random() < 0.5 else ["--junit", "{dir}/j.xml"])))


def _gate_baseline_case(rng: random.Random) -> Case:
    fx = _fixtures()
    text = fi.dumps(fi.mutate_doc(rng, json.loads(fx["report"]))) if rng.random() < 0.6 else fx["report"]
    text = fi.mutate_bytes(rng, text) if rng.random() < 0.5 else text
    name = "base.json"
    if rng.random() < 0.25:
        name, text = "base.json.gz", gzip.compress(text, mtime=0)
        text = fi.mutate_bytes(rng, text, 1) if rng.random() < 0.3 else text
    out = ["--json"] if rng.random() < 0.5 else []
    return Case({"cand.json": fx["report"], name: text},
                ("gate", "{dir}/cand.json", "--baseline", f"{{dir}}/{name}", *out))


def _prices_case(rng: random.Random) -> Case:
    env = {"GPUSCOPE_HOME": "{dir}/home"}
    files = {"t.json": _fixtures()["trace"]}
    if rng.random() < 0.6:
        files["home/config.toml"] = fi.mutated_toml(rng, fi.PRICE_CONFIG)
    for var in ("GPUSCOPE_USD_PER_GPU_HOUR", "GPUSCOPE_GRID_KG_CO2_PER_KWH"):
        if rng.random() < 0.3:
            env[var] = fi.price_text(rng)
    if rng.random() < 0.25:
        return Case(files, ("prices", "--gpu", rng.choice(("NVIDIA H100 80GB HBM3", "A100", "\u202e", "x" * 500))), env)
    cli = []
    if rng.random() < 0.5:
        cli = ["--usd-per-gpu-hour", fi.price_text(rng) if rng.random() < 0.5 else repr(fi.price_number(rng))]
    return Case(files, ("analyze", "{dir}/t.json", "--no-save", "--job-hours", "2", *cli), env)


SORTS = ("gpu_self", "gpu_total", "cpu_self", "cpu_total", "calls", "name")


STEPPED_TRACES = ("h200/pageable_h2d/rank0.1796401749203070644.pt.trace.json.gz", fi.COPIES_TRACE,
                  "dev/triton_example.json.gz", "gloo_4rank/delayed/rank2.1796497271831870586.pt.trace.json.gz",
                  "cpu_gloo_ddp/rank0.1796497133090213936.pt.trace.json.gz",
                  "cpu_checkpoint_outlier/rank0.1796497103260914794.pt.trace.json.gz")
"""Small bundled traces with profiler steps (12, 1, 1, 10, 6 and 12): what `timeline` and the step columns of
`ops` read; the last three are CPU jobs (gloo collectives with their process group and sequence numbers, a
checkpoint's outlier step), whose operators and steps no GPU event holds."""


def _view_trace(rng: random.Random) -> tuple[str, bytes]:
    """A trace for the views, half the time one with profiler steps: mutated (one in five in the 2021 schema),
    or now and then a clean one."""
    old = rng.random() < 0.2
    base = rng.choice(STEPPED_TRACES if rng.random() < 0.5 else fi.SMALL_TRACES)
    if rng.random() < 0.9:
        return fi.mutated_trace(rng, base=base, old=old)
    text = fi.sample_text(base)
    return "rank0.json", fi.dumps(fi.old_schema(json.loads(text))) if old else text


def _ops_case(rng: random.Random) -> Case:
    name, data = _view_trace(rng)
    extra = rng.choice(([], ["--json"], ["--sort", rng.choice(SORTS)], ["--rank", "0"], ["--top", "0", "--kernels",
                                                                                      "9"]))
    return Case({name: data}, ("ops", f"{{dir}}/{name}", *extra))


def _timeline_case(rng: random.Random) -> Case:
    name, data = _view_trace(rng)
    return Case({name: data}, ("timeline", f"{{dir}}/{name}", "-o", "{dir}/steps",
                               *(["--gzip"] if rng.random() < 0.3 else [])))


def _diff_case(rng: random.Random) -> Case:
    """Two traces, one of them (or both) mutated."""
    (a, data_a) = _view_trace(rng)
    b, data_b = _view_trace(rng) if rng.random() < 0.4 else ("rank0.json", fi.sample_text(rng.choice(fi.SMALL_TRACES)))
    if rng.random() < 0.5:
        (a, data_a), (b, data_b) = (b, data_b), (a, data_a)
    return Case({f"a/{a}": data_a, f"b/{b}": data_b}, ("diff", f"{{dir}}/a/{a}", f"{{dir}}/b/{b}",
                                                       *(["--json"] if rng.random() < 0.5 else [])))


READERS: dict[str, Reader] = {r.name: r for r in (
    Reader("trace", lambda rng: _trace_case(rng, gz=False), "mutated bundled traces, .json"),
    Reader("trace_gz", lambda rng: _trace_case(rng, gz=True), "mutated bundled traces, .json.gz"),
    Reader("gate_config", _gate_config_case, "gate configs (TOML), mutated or generated"),
    Reader("gate_baseline", _gate_baseline_case, "saved reports as gate baselines, mutated (.json, .json.gz)"),
    Reader("prices", _prices_case, "config.toml, price and grid variables, --usd-per-gpu-hour"),
    Reader("ops", _ops_case, "mutated bundled traces (some in the 2021 schema) through `gpuscope ops`"),
    Reader("timeline", _timeline_case, "mutated bundled traces (some in the 2021 schema) through `gpuscope timeline`"),
    Reader("diff", _diff_case, "two mutated bundled traces through `gpuscope diff`"),
    Reader("store", lambda rng: Case(*fs.store_case(rng)),
           "a damaged run store under `ops`, `timeline`, `diff`, `show`, `runs`, `report`"),
    Reader("dashboard", lambda rng: Case(*fs.dashboard_case(rng)), "a damaged run store, every dashboard route asked"),
    Reader("copies", lambda rng: _trace_case(rng, gz=None, base=fi.COPIES_TRACE),
           "mutated copies of one bundled trace (dlrm_8rank rank 0), .json or .json.gz"),
)}
DEFAULT_READERS = ("trace", "trace_gz", "gate_config", "gate_baseline", "prices", "ops", "timeline", "diff", "store",
                   "dashboard")


def make_case(reader: str, seed: int, index: int) -> Case:
    return READERS[reader].make(random.Random(f"{seed}:{reader}:{index}"))


def write_case(case: Case, folder: Path) -> tuple[list[str], dict[str, str]]:
    """The case's files written under ``folder``; its arguments and environment with the folder filled in."""
    for name, data in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    fill = lambda text: text.replace("{dir}", str(folder))  # noqa: E731
    return [fill(a) for a in case.args], {k: fill(v) for k, v in case.env.items()}


# -- one input, in-process -----------------------------------------------------------------------------

def run_in_process(case: Case, folder: Path) -> tuple[str, str]:
    """(outcome, one line) of the command on this input, as ``gpuscope.cli.main.main`` would end it."""
    from typer.testing import CliRunner

    from gpuscope.cli.main import app

    args, env = write_case(case, folder)
    if args[:1] == [fs.DASHBOARD]:
        return fs.ask_every_route(folder / "home")
    result = CliRunner().invoke(app, args, env={"COLUMNS": "100", "GPUSCOPE_HOME": str(folder / "home"), **env})
    failed = fuzzing.cli_failure(result)
    if failed is not None:
        return failed
    if result.exit_code in (0, 1):
        return "result", ""
    lines = result.stderr.strip().splitlines()
    said = [line for line in lines if line.startswith("gpuscope: error:") or "Invalid value" in line]
    return "user_error", (said or lines or [f"exit {result.exit_code}"])[-1]


def _run_one(reader: str, seed: int, index: int) -> tuple[str, str]:
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-fuzz-"))
    try:
        return run_in_process(make_case(reader, seed, index), folder)
    except Exception as exc:  # noqa: BLE001 - making or writing the input failed: a bug of this script
        return "crash", f"harness: {type(exc).__name__}: {exc}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _session(reader: str, seed: int) -> Iterator[fuzzing.RunOne]:
    """In the worker: the trace cap lowered and the fixtures made, then each input in a fresh folder."""
    os.environ["GPUSCOPE_MAX_TRACE_GIB"] = str(TRACE_CAP_GIB)
    _fixtures()
    if reader in ("store", "dashboard"):
        fs.base_store()
    yield partial(_run_one, reader, seed)


# -- the run ---------------------------------------------------------------------------------------------

class Tally(fuzzing.Tally):
    @staticmethod
    def error_key(line: str) -> str:
        """A user error's kind, without the paths and values in it."""
        text = re.sub(r"/\S+", "PATH", line.removeprefix("gpuscope: error: ").strip("│ "))
        return " ".join(text.split()[:6])[:70]


def fuzz(reader: str, *, tally: Tally | None = None, **options: Any) -> Tally:
    """Run inputs ``tally.next`` to ``count - 1`` of ``reader`` (options: ``fuzzing.fuzz``'s); the tally, updated."""
    return fuzzing.fuzz(reader, _session, tally or Tally(), **options)


def copies(n: int, *, seed: int, bound_s: float, base: str = fi.COPIES_TRACE) -> Tally:
    """``n`` mutated copies of one bundled trace through the real ``gpuscope analyze``, each in a subprocess."""
    tally = Tally()
    start = time.monotonic()
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(fi.ROOT), "GPUSCOPE_MAX_TRACE_GIB": str(TRACE_CAP_GIB)}
    for i in range(n):
        rng = random.Random(f"{seed}:copies:{i}")
        name, data = fi.mutated_trace(rng, base=base, gz=rng.random() < 0.5)
        with tempfile.TemporaryDirectory(prefix="gpuscope-copy-") as folder:
            (Path(folder) / name).write_bytes(data)
            try:
                done = subprocess.run([sys.executable, "-m", "gpuscope", "analyze", str(Path(folder) / name),
                                       "--no-save"], capture_output=True, text=True, timeout=bound_s,
                                      env={**env, "GPUSCOPE_HOME": folder})
            except subprocess.TimeoutExpired:
                tally.add(i, "hang", f"no exit after {bound_s:.0f} s")
                continue
        lines = done.stderr.strip().splitlines()
        if "Traceback" in done.stderr or done.returncode not in (0, 2):
            tally.add(i, "crash", lines[-1] if lines else f"exit {done.returncode}")
        elif done.returncode == 2:
            errors = [line for line in lines if line.startswith("gpuscope: error:")]
            tally.add(i, "user_error" if len(errors) == 1 else "crash", lines[-1])
        else:
            tally.add(i, "result", "")
    tally.seconds = time.monotonic() - start
    return tally


table = fuzzing.table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readers", default=",".join(DEFAULT_READERS), help=f"Of: {', '.join(READERS)}.")
    fuzzing.add_run_options(parser)
    parser.add_argument("--copies", type=int, help="Instead: this many mutated copies through the real command.")
    parser.add_argument("--show", metavar="READER:INDEX", help="Write one input's files to ./fuzz-case and exit.")
    args = parser.parse_args()
    if args.show:
        reader, index = args.show.split(":")
        out = Path("fuzz-case")
        out.mkdir(exist_ok=True)
        print(" ".join(write_case(make_case(reader, args.seed, int(index)), out.resolve())[0]))
        return
    if args.copies:
        t = copies(args.copies, seed=args.seed, bound_s=args.time_bound_s)
        print(json.dumps({"copies": args.copies, "counts": t.counts, "failures": t.failures, "seconds": t.seconds,
                          "errors": t.errors}, indent=1))
        return
    fuzzing.run(args, _session, Tally)


if __name__ == "__main__":
    main()
