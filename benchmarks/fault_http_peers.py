"""What gpuscope does when its HTTP peers misbehave, measured: each fault of a Prometheus or a dcgm-exporter endpoint
played by a real server on 127.0.0.1 (tests/hostile.py), against the real command in a subprocess.

- ``gpuscope fleet --timeout 3`` against a Prometheus that refuses, hangs, drips, answers 5xx, garbage, malformed
  points, part of the queries, an answer cut short, a reset; and with ``--timeout 20 --max-answer-mb 8`` against
  one that answers without end or with a gzip bomb, and against the same with a cap too large to matter (4,000 MiB;
  the process is killed at 1 GiB) to show what the cap holds back;
- ``gpuscope run --dcgm URL`` against an endpoint that refuses, hangs or answers garbage at the start;
- one ``DcgmSampler`` scrape (timeout 0.5 s; 20 s for the endless answers, so that the cap stops them) per fault.

For each: the exit code (or the scrape's outcome), the seconds it took, the process's peak RSS (sampled every
20 ms), and the one line it printed. Prints a markdown table.

    .venv/bin/python benchmarks/fault_http_peers.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests import hostile as H  # noqa: E402 - the tests' misbehaving server, from the repository root

WINDOW = ("--start", "1000", "--end", "1600", "--step", "60s")
CEILING_BYTES = 1 << 30
UTIL = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": "GPU-1", "Hostname": "n1", "modelName": "Tesla T4"}


def _good(request: H.Request) -> H.Act:
    if "GPU_UTIL" in request.form.get("query", ""):
        return H.answer(200, H.matrix([(UTIL, [(float(t), "50") for t in range(1060, 1601, 60)])]))
    return H.answer(200, H.empty_matrix())


ENDLESS = H.endless(b'{"metric":{"gpu":"0"},"values":[]},')
PROMETHEUS: list[tuple[str, Callable[[H.Request], H.Act] | None, tuple[str, ...]]] = [
    ("refuses", None, ("--timeout", "3")),
    ("accepts and never answers", lambda r: H.hang, ("--timeout", "3")),
    ("drips its headers, 1 byte/s", lambda r: H.drip(headers_too=True), ("--timeout", "3")),
    ("drips its body, 1 byte/s", lambda r: H.drip(headers_too=False), ("--timeout", "3")),
    ("answers 500", lambda r: H.answer(500, b"Internal Server Error"), ("--timeout", "3")),
    ("answers 503 (retried)", lambda r: H.answer(503, b"", headers={"Retry-After": "0"}), ("--timeout", "20")),
    ("answers garbage", lambda r: H.answer(200, b"<html>welcome to nginx</html>"), ("--timeout", "3")),
    ("answers malformed points", lambda r: H.answer(200, H.matrix([(UTIL, [(1060.0, "fifty")])])),
     ("--timeout", "3")),
    ("answers part, fails the rest", lambda r: _good(r) if "GPU_UTIL" in r.form["query"] else H.answer(500, b""),
     ("--timeout", "3")),
    ("answers part, hangs on the rest", lambda r: _good(r) if "GPU_UTIL" in r.form["query"] else H.hang,
     ("--timeout", "3")),
    ("cuts its answer short", lambda r: H.cut_short, ("--timeout", "3")),
    ("resets the connection", lambda r: H.reset, ("--timeout", "3")),
    ("answers without end", lambda r: ENDLESS, ("--timeout", "20", "--max-answer-mb", "8")),
    ("sends a gzip bomb", lambda r: H.gzip_bomb, ("--timeout", "20", "--max-answer-mb", "8")),
    ("answers without end, cap 4,000 MiB", lambda r: ENDLESS, ("--timeout", "20", "--max-answer-mb", "4000")),
]
DCGM: list[tuple[str, H.Act | None]] = [
    ("refuses", None), ("accepts and never answers", H.hang), ("drips its headers", H.drip(headers_too=True)),
    ("drips its body", H.drip(headers_too=False)), ("answers 500", H.answer(500, b"oops")),
    ("answers garbage", H.answer(200, b"<html>welcome to nginx</html>\n")), ("cuts its answer short", H.cut_short),
    ("resets the connection", H.reset), ("answers without end", H.endless(b"# HELP x y\n")),
    ("sends a gzip bomb", H.gzip_bomb),
]


def measured(command: list[str], home: str) -> tuple[int, float, float, str]:
    """Exit code (-9: killed past the ceiling), seconds, peak RSS in MiB and the last line on stderr."""
    env = {**os.environ, "GPUSCOPE_HOME": home, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    code, peak, err = H.peak_rss_of(command, env, ceiling_bytes=CEILING_BYTES)
    took = time.monotonic() - start
    lines = [line for line in err.splitlines() if line.strip()]
    return code, took, peak / 2**20, (lines[-1] if lines else "") + (
        f" ({len(lines)} lines)" if len(lines) > 1 else "")


@contextmanager
def _peer(behave: Callable[[H.Request], H.Act] | None) -> Iterator[int]:
    """The port of a hostile server that behaves so, or (``None``) of a port nothing listens on."""
    server = H.Hostile()
    try:
        if behave is not None:
            server.behave = behave
        yield H.closed_port() if behave is None else server.port
    finally:
        server.close()


def fleet_rows() -> list[str]:
    rows = []
    for name, behave, args in PROMETHEUS:
        with _peer(behave) as port, tempfile.TemporaryDirectory() as home:
            code, took, peak, line = measured([sys.executable, "-m", "gpuscope", "fleet", "--prometheus",
                                               f"http://127.0.0.1:{port}", *WINDOW, *args], home)
        rows.append(f"| Prometheus {name} | `fleet {' '.join(args)}` | {code} | {took:.1f} | {peak:.0f} | "
                    f"{_short(line)} |")
    return rows


def _acting(act: H.Act | None) -> Callable[[H.Request], H.Act] | None:
    return None if act is None else lambda r: act


def run_rows() -> list[str]:
    rows = []
    for name, act in (DCGM[0], DCGM[1], DCGM[5]):  # refuses, never answers, garbage
        with _peer(_acting(act)) as port, tempfile.TemporaryDirectory() as home:
            code, took, peak, line = measured([sys.executable, "-m", "gpuscope", "run", "--dcgm", f"127.0.0.1:{port}",
                                               "--", sys.executable, "-c", "pass"], home)
        rows.append(f"| dcgm-exporter {name}, at the start | `run --dcgm` | {code} | {took:.1f} | {peak:.0f} | "
                    f"{_short(line)} |")
    return rows


def scrape_rows() -> list[str]:
    from gpuscope.collectors.dcgm import DcgmSampler

    rows = []
    for name, act in DCGM:
        with _peer(_acting(act)) as port:
            sampler = DcgmSampler(f"127.0.0.1:{port}", timeout_s=20 if "without end" in name or "bomb" in name
                                  else 0.5)
            start = time.monotonic()
            rows_got = sampler.sample(1)
            took = time.monotonic() - start
        outcome = f"{len(rows_got)} rows" if rows_got else "gap"
        reason = (sampler.last_error or "").split(": ", 1)[-1]
        rows.append(f"| dcgm-exporter {name}, one scrape | `DcgmSampler` | {outcome} | {took:.2f} | | {reason} |")
    return rows


def _short(line: str) -> str:
    text = line.removeprefix("gpuscope: error: ")
    text = text.replace("http://127.0.0.1", "http://host").replace("|", "/")
    return text if len(text) <= 150 else text[:147] + "..."


def main() -> None:
    print("| fault | command | exit | seconds | peak RSS MiB | what it said |")
    print("|---|---|---|---|---|---|")
    for row in fleet_rows() + run_rows() + scrape_rows():
        print(row, flush=True)


if __name__ == "__main__":
    main()
