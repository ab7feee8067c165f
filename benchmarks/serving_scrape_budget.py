"""A serving-metrics scrape of 300,000 series, measured: ``gpuscope attach PID --serving-metrics URL --duration 8``
against a real server on 127.0.0.1 whose /metrics is about 15 MB, in two kinds:

- ``other``: 300,000 series of another exporter's metric and one vLLM token counter growing 1,000 a second (what a
  metrics endpoint shared with other exporters looks like);
- ``serving``: 300,000 series of vLLM's token counter (no one server has that many);
- ``small``: the vLLM counter alone, for the command's own time around the sampling.

For each: the command's wall seconds, the seconds it sampled, its peak RSS (``RUSAGE_CHILDREN``, one command per
process of this script), the output tokens a second it reported, and its exit status and last line. Run it with the
tree to measure first on ``PYTHONPATH``:

    PYTHONPATH=. .venv/bin/python benchmarks/serving_scrape_budget.py other
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SERIES = 300_000
DURATION_S = 8


def body(kind: str) -> str:
    """The scrape's text, the token counter's value left as TOKENS (filled in at each scrape)."""
    if kind == "small":
        lines = ['vllm:generation_tokens_total{engine="0",model_name="m"} TOKENS']
    elif kind == "other":
        lines = [f'some_metric_total{{pod="pod-{i}",c="x"}} {i}.5' for i in range(SERIES)]
        lines.append('vllm:generation_tokens_total{engine="0",model_name="m"} TOKENS')
    else:
        lines = [f'vllm:generation_tokens_total{{engine="{i}"}} TOKENS' for i in range(SERIES)]
    return "\n".join(lines) + "\n"


def serve(kind: str) -> tuple[ThreadingHTTPServer, int]:
    """The server, and its scrape's size in bytes."""
    started, text = time.time(), body(kind)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
            raw = text.replace("TOKENS", str(int(1000 * (time.time() - started)))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            try:
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the scrape gave up at its time limit

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, len(text.replace("TOKENS", "1000000").encode())


def main(kind: str) -> None:
    server, size = serve(kind)
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with tempfile.TemporaryDirectory() as home:
            started = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "gpuscope", "attach", str(target.pid), "--serving-metrics",
                 f"127.0.0.1:{server.server_address[1]}", "--duration", str(DURATION_S), "--no-stacks", "--json"],
                capture_output=True, text=True, env={**os.environ, "GPUSCOPE_HOME": home}, check=False)
            wall_s = time.monotonic() - started
    finally:
        target.kill()
        target.wait()
        server.shutdown()
        server.server_close()
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    line = {"kind": kind, "scrape_mb": round(size / 1e6, 1), "exit": result.returncode, "wall_s": round(wall_s, 1),
            "peak_rss_mib": round(peak_mib)}
    if result.returncode == 0:
        report = json.loads(result.stdout)
        metrics = (report.get("serving") or {}).get("metrics") or {}
        line.update(sampled_s=round(report["run"]["duration_s"], 1),
                    output_tokens_per_s=metrics.get("output_tokens_per_s"), warnings=report["warnings"])
    else:
        line["said"] = result.stderr.strip().splitlines()[-1]
    print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "other")
