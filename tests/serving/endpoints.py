"""Serving-metrics endpoints whose values are known by construction: real HTTP servers on 127.0.0.1 that speak one
engine's metric names (vLLM, its older names, SGLang, TGI) with counters that grow at fixed rates from the moment
the server starts, fixed gauges, and latency histograms fed a fixed number of observations a second in fixed
buckets. What a scrape at time t serves is rate x (t - t0): any window's increase is rate x its length."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Protocol

TTFT_PER_S = 20.0
TTFT_BUCKETS: tuple[tuple[str, float], ...] = (("0.05", 2.0), ("0.1", 8.0), ("0.25", 15.0), ("0.5", 17.0),
                                               ("1.0", 20.0), ("+Inf", 20.0))
"""(le, cumulative observations per second): 2 at 0.03 s, 6 at 0.08 s, 7 at 0.2 s, 2 at 0.4 s and 3 at 0.8 s."""
TTFT_SUM_PER_S = 2 * 0.03 + 6 * 0.08 + 7 * 0.2 + 2 * 0.4 + 3 * 0.8
# histogram_quantile by hand from the buckets above (ranks of 20 observations, linear inside a bucket):
TTFT_P50_S = 0.1 + (0.25 - 0.1) * (10 - 8) / (15 - 8)  # rank 10 in (0.1, 0.25]
TTFT_P90_S = 0.5 + (1.0 - 0.5) * (18 - 17) / (20 - 17)  # rank 18 in (0.5, 1]
TTFT_P99_S = 0.5 + (1.0 - 0.5) * (19.8 - 17) / (20 - 17)  # rank 19.8 in (0.5, 1]


@dataclass(frozen=True)
class Names:
    output: str
    prompt: str
    running: str
    waiting: str
    kv: str | None
    ttft: str | None


VLLM = Names("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:num_requests_running",
             "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:time_to_first_token_seconds")
VLLM_OLD = Names("vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:num_requests_running",
                 "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc", "vllm:time_to_first_token_seconds")
SGLANG = Names("sglang:generation_tokens_total", "sglang:prompt_tokens_total", "sglang:num_running_reqs",
               "sglang:num_queue_reqs", "sglang:token_usage", "sglang:time_to_first_token_seconds")
TGI = Names("tgi_request_generated_tokens_sum", "tgi_request_input_length_sum", "tgi_batch_current_size",
            "tgi_queue_size", None, None)


@dataclass
class Engine:
    """What one server serves: its names, token rates (per second), gauges, and whether it has a TTFT histogram."""

    names: Names
    output_per_s: float
    prompt_per_s: float
    running: float
    waiting: float
    kv: float = 0.0
    model: str = "Qwen/Qwen3-8B"
    t0: float = field(default_factory=time.time)
    bad_bucket: bool = False
    """Its TTFT histogram has one more bucket, ``le="abc"``, which no histogram can hold."""

    def text(self, now: float) -> str:
        n = self.names
        dt = now - self.t0
        label = f'model_name="{self.model}"'
        lines = [f"{n.output}{{{label}}} {self.output_per_s * dt:.6f}",
                 f"{n.prompt}{{{label}}} {self.prompt_per_s * dt:.6f}",
                 f"{n.running}{{{label}}} {self.running:g}", f"{n.waiting}{{{label}}} {self.waiting:g}",
                 f'process_cpu_seconds_total {dt:.3f}']
        if n.kv is not None:
            lines.append(f"{n.kv}{{{label}}} {self.kv:g}")
        if n.ttft is not None:
            lines += [f'{n.ttft}_bucket{{le="{le}",{label}}} {per_s * dt:.6f}' for le, per_s in TTFT_BUCKETS]
            if self.bad_bucket:
                lines.append(f'{n.ttft}_bucket{{le="abc",{label}}} {dt:.6f}')
            lines += [f"{n.ttft}_sum{{{label}}} {TTFT_SUM_PER_S * dt:.6f}",
                      f"{n.ttft}_count{{{label}}} {TTFT_PER_S * dt:.6f}"]
        return "\n".join(lines) + "\n"


@dataclass
class DataParallel:
    """A vLLM server of two data-parallel engines (``engine="0"`` and ``"1"``), each generating ``per_engine_per_s``
    tokens a second since long before (their counters start at ``started_s`` of tokens), engine 1 restarting
    ``restart_after_s`` after the first scrape (its counter from 0 again), and the scrape ``miss_after_s`` after the
    first answered 503 (a missed scrape). With ``broken``, its TTFT histogram has a bucket ``le="-1"`` and buckets
    out of order, and its end-to-end histogram a bucket ``le="abc"``: no latency figure can be read from either."""

    per_engine_per_s: float
    restart_after_s: float
    miss_after_s: float | None = None
    started_s: float = 800.0
    broken: bool = False
    first: float | None = None
    restart_at: float | None = None
    """When engine 1 restarts (set at the first scrape from ``restart_after_s``, unless set before)."""
    missed: bool = False

    def text(self, now: float) -> str | None:
        if self.first is None:
            self.first = now
            if self.restart_at is None:
                self.restart_at = now + self.restart_after_s
        since = now - self.first
        if self.miss_after_s is not None and since >= self.miss_after_s and not self.missed:
            self.missed = True
            return None
        assert self.restart_at is not None
        engine1 = now - self.restart_at if now >= self.restart_at else self.started_s + since
        lines = []
        for engine, seconds in (("0", self.started_s + since), ("1", engine1)):
            label = f'engine="{engine}",model_name="m"'
            lines += [f"vllm:generation_tokens_total{{{label}}} {self.per_engine_per_s * seconds:.6f}",
                      f"vllm:prompt_tokens_total{{{label}}} {3 * self.per_engine_per_s * seconds:.6f}",
                      f"vllm:num_requests_running{{{label}}} 4"]
            if self.broken:
                ttft = "vllm:time_to_first_token_seconds"
                lines += [f'{ttft}_bucket{{le="-1",{label}}} {5 * seconds:.3f}',
                          f'{ttft}_bucket{{le="0.1",{label}}} {9 * seconds:.3f}',
                          f'{ttft}_bucket{{le="0.5",{label}}} {7 * seconds:.3f}',
                          f'{ttft}_bucket{{le="+Inf",{label}}} {10 * seconds:.3f}',
                          f"{ttft}_sum{{{label}}} {2 * seconds:.3f}", f"{ttft}_count{{{label}}} {10 * seconds:.3f}"]
                e2e = "vllm:e2e_request_latency_seconds"
                lines += [f'{e2e}_bucket{{le="abc",{label}}} {seconds:.3f}',
                          f'{e2e}_bucket{{le="+Inf",{label}}} {2 * seconds:.3f}',
                          f"{e2e}_sum{{{label}}} {seconds:.3f}", f"{e2e}_count{{{label}}} {2 * seconds:.3f}"]
        return "\n".join(lines) + "\n"


class Served(Protocol):
    def text(self, now: float) -> str | None:
        """The scrape's body at ``now``; None answers 503 (a missed scrape)."""


class Endpoint:
    """One engine's /metrics on a free loopback port."""

    def __init__(self, engine: Served) -> None:
        self.engine = engine
        self.scrapes: list[float] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's spelling
                now = time.time()
                endpoint.scrapes.append(now)
                text = endpoint.engine.text(now)
                if text is None:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def close_all(endpoints: Sequence[Endpoint]) -> None:
    for e in endpoints:
        e.close()
