"""What `gpuscope analyze` does when a trace URL's server or a Dask scheduler misbehaves, measured: each fault played
by a real server on 127.0.0.1 (tests/hostile.py), against the real command in a subprocess.

- ``analyze http(s)://...`` against a server that refuses, accepts and never answers, drips its headers or its body
  one byte a second, hangs in the TLS handshake, redirects in a loop, answers 403 or 500, cuts its answer short,
  resets the connection, and (``GPUSCOPE_MAX_TRACE_GIB=0.05``) answers without end or with a gzip bomb;
- ``analyze s3://...`` whose endpoint (``AWS_ENDPOINT_URL``) accepts and never answers, or refuses;
- ``analyze --dask tcp://...`` against a port that accepts and never answers, and one that refuses;
- the never-answering server, the TLS hang and the silent Dask port once more on the stated defaults.

Every URL carries a user, a password and a token; a row says "LEAK" if either is on stdout or stderr. For each:
the exit code, the seconds it took (a loaded interpreter's start included), the process's peak RSS (sampled every
20 ms) and the one line it printed. Prints a markdown table.

    .venv/bin/python benchmarks/fault_remote_traces.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.fault_http_peers import _peer  # noqa: E402 - the same misbehaving servers
from tests import hostile as H  # noqa: E402

PW, TOKEN = "S3cretPW", "t0kenvalue"
SAMPLE = ROOT / "sample_traces" / "dlrm_8rank"
Behave = Callable[[H.Request], H.Act] | None
HTTP: list[tuple[str, Behave, str, tuple[str, ...]]] = [
    ("refuses", None, "http", ("--timeout", "5")),
    ("accepts and never answers", lambda r: H.hang, "http", ("--timeout", "5")),
    ("drips its headers, 1 byte/s", lambda r: H.drip(headers_too=True), "http", ("--timeout", "5")),
    ("drips its body, 1 byte/s", lambda r: H.drip(headers_too=False), "http", ("--timeout", "5")),
    ("hangs in the TLS handshake", lambda r: H.hang, "https", ("--timeout", "5")),
    ("redirects in a loop", lambda r: H.answer(302, b"", headers={"Location": r.path}), "http", ()),
    ("answers 403", lambda r: H.answer(403, b"denied"), "http", ()),
    ("answers 500", lambda r: H.answer(500, b"boom"), "http", ()),
    ("cuts its answer short", lambda r: H.cut_short, "http", ()),
    ("resets the connection", lambda r: H.reset, "http", ()),
    ("answers without end", lambda r: H.endless(b"x"), "http", ()),
    ("sends a gzip bomb", lambda r: H.gzip_bomb, "http", ()),
    ("accepts and never answers (defaults)", lambda r: H.hang, "http", ()),
    ("hangs in the TLS handshake (defaults)", lambda r: H.hang, "https", ()),
]
CAP = {"GPUSCOPE_MAX_TRACE_GIB": "0.05"}
S3 = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLE", "AWS_SECRET_ACCESS_KEY": "example-secret-key-0", "AWS_DEFAULT_REGION":
      "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/nonexistent",
      "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}


def measured(args: list[str], env: dict[str, str]) -> tuple[int, float, float, str]:
    """Exit code, seconds, peak RSS in MiB and the last line on stderr ("LEAK" first when a secret showed)."""
    with tempfile.TemporaryDirectory() as home:
        full = {**os.environ, "GPUSCOPE_HOME": home, "PYTHONPATH": str(ROOT), **env}
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "gpuscope", "analyze", *args, "--no-save"], env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak = 0
        import psutil

        watched = psutil.Process(proc.pid)
        while proc.poll() is None:
            try:
                peak = max(peak, watched.memory_info().rss)
            except psutil.NoSuchProcess:
                break
            time.sleep(0.02)
        out, err = proc.communicate()
        took = time.monotonic() - start
    lines = [line for line in err.splitlines() if line.strip()]
    leak = "LEAK " if PW in out + err or TOKEN in out + err else ""
    return proc.returncode, took, peak / 2**20, leak + (lines[-1] if lines else "") + (
        f" ({len(lines)} lines)" if len(lines) > 1 else "")


def rows() -> list[str]:
    table = []
    for name, behave, scheme, args in HTTP:
        with _peer(behave) as port:
            url = f"{scheme}://alice:{PW}@127.0.0.1:{port}/job/t.json.gz?token={TOKEN}"
            env = CAP if "end" in name or "bomb" in name else {}
            table.append(_row(f"{scheme} server {name}", ["analyze URL", *args], measured([url, *args], env)))
    for name, behave in (("accepts and never answers", lambda r: H.hang), ("refuses", None)):
        with _peer(behave) as port:
            env = {**S3, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
            table.append(_row(f"S3 endpoint {name}", ["analyze s3://...", "--timeout", "20"],
                              measured([f"s3://bucket/job/?token={TOKEN}", "--timeout", "20"], env)))
    for name, behave, args in (("accepts and never answers", lambda r: H.hang, ()), ("refuses", None, ())):
        with _peer(behave) as port:
            table.append(_row(f"Dask scheduler {name}", ["analyze --dask", *args],
                              measured([str(SAMPLE), "--dask", f"tcp://127.0.0.1:{port}", *args], {})))
    return table


def _row(fault: str, command: list[str], result: tuple[int, float, float, str]) -> str:
    code, took, peak, line = result
    text = line.removeprefix("gpuscope: error: ").replace("127.0.0.1", "host").replace("|", "/")
    return f"| {fault} | `{' '.join(command)}` | {code} | {took:.1f} | {peak:.0f} | {text[:160]} |"


def main() -> None:
    print("| fault | command | exit | seconds | peak RSS MiB | what it said |")
    print("|---|---|---|---|---|---|")
    for row in rows():
        print(row, flush=True)


if __name__ == "__main__":
    main()
