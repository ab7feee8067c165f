"""The serving engines' metric names (vLLM, SGLang, Hugging Face TGI), each mapped to one engine-neutral figure
(``model.schema.SERVING_*``): what the live scrape reads, what the fleet asks Prometheus for, and what advice names.

The names are the engines' own, as their metric loggers register them:

- vLLM (``vllm/v1/metrics/loggers.py``): ``vllm:generation_tokens_total``, ``vllm:prompt_tokens_total``,
  ``vllm:num_requests_running``/``_waiting``, ``vllm:kv_cache_usage_perc`` (older: ``vllm:gpu_cache_usage_perc``),
  histograms ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds`` (older:
  ``vllm:time_per_output_token_seconds``), ``vllm:e2e_request_latency_seconds``;
- SGLang (``sglang/srt/metrics/collector.py``, ``--enable-metrics``): ``sglang:generation_tokens_total``,
  ``sglang:prompt_tokens_total``, ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``
  (the KV pool's used share), histograms ``sglang:time_to_first_token_seconds``,
  ``sglang:inter_token_latency_seconds``, ``sglang:e2e_request_latency_seconds``; the ``sglang_`` spelling too;
- TGI (its metrics reference): ``tgi_request_generated_tokens`` and ``tgi_request_input_length`` are histograms
  per request, whose ``_sum`` counts the tokens; ``tgi_batch_current_size`` (running), ``tgi_queue_size``
  (waiting), ``tgi_request_mean_time_per_token_duration`` (inter-token latency), ``tgi_request_duration`` (end to
  end). TGI exports no KV-cache use and no time to first token: those stay unknown.

Where an engine exports the same figure under an old and a new name, the first listed is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from gpuscope.model.schema import (
    SERVING_HISTOGRAMS,
    SERVING_KV_CACHE_USAGE,
    SERVING_OUTPUT_TOKENS,
    SERVING_PROMPT_TOKENS,
    SERVING_REQUESTS_RUNNING,
    SERVING_REQUESTS_WAITING,
)
from gpuscope.model.serving import Engine

TTFT, ITL, E2E = SERVING_HISTOGRAMS
MetricKind = Literal["counter", "gauge", "histogram"]
@dataclass(frozen=True)
class EngineMetric:
    """One engine-neutral figure and the engines' names for it, preferred first."""

    metric: str
    """``model.schema`` name (a histogram's base: its rows add ``.sum``, ``.count``, ``.le=BOUND``)."""
    kind: MetricKind
    names: tuple[tuple[str, Engine], ...]
    aggregate: Literal["sum", "mean"] = "sum"
    """How several series of the name combine (engines of one server, models)."""


def _spellings(engine: Engine, *names: str) -> tuple[tuple[str, Engine], ...]:
    """Each name, and for SGLang its ``sglang_`` spelling too (exporters that turn ':' into '_')."""
    out: list[tuple[str, Engine]] = []
    for name in names:
        out.append((name, engine))
        if name.startswith("sglang:"):
            out.append(("sglang_" + name.removeprefix("sglang:"), engine))
    return tuple(out)


ENGINE_METRICS: tuple[EngineMetric, ...] = (
    EngineMetric(SERVING_OUTPUT_TOKENS, "counter", (
        *_spellings("vllm", "vllm:generation_tokens_total"), *_spellings("sglang", "sglang:generation_tokens_total"),
        *_spellings("tgi", "tgi_request_generated_tokens_sum"))),
    EngineMetric(SERVING_PROMPT_TOKENS, "counter", (
        *_spellings("vllm", "vllm:prompt_tokens_total"), *_spellings("sglang", "sglang:prompt_tokens_total"),
        *_spellings("tgi", "tgi_request_input_length_sum"))),
    EngineMetric(SERVING_REQUESTS_RUNNING, "gauge", (
        *_spellings("vllm", "vllm:num_requests_running"), *_spellings("sglang", "sglang:num_running_reqs"),
        *_spellings("tgi", "tgi_batch_current_size"))),
    EngineMetric(SERVING_REQUESTS_WAITING, "gauge", (
        *_spellings("vllm", "vllm:num_requests_waiting"), *_spellings("sglang", "sglang:num_queue_reqs"),
        *_spellings("tgi", "tgi_queue_size"))),
    EngineMetric(SERVING_KV_CACHE_USAGE, "gauge", (
        *_spellings("vllm", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        *_spellings("sglang", "sglang:token_usage")), aggregate="mean"),
    EngineMetric(TTFT, "histogram", (
        *_spellings("vllm", "vllm:time_to_first_token_seconds"),
        *_spellings("sglang", "sglang:time_to_first_token_seconds"))),
    EngineMetric(ITL, "histogram", (
        *_spellings("vllm", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        *_spellings("sglang", "sglang:inter_token_latency_seconds"),
        *_spellings("tgi", "tgi_request_mean_time_per_token_duration"))),
    EngineMetric(E2E, "histogram", (
        *_spellings("vllm", "vllm:e2e_request_latency_seconds"),
        *_spellings("sglang", "sglang:e2e_request_latency_seconds"), *_spellings("tgi", "tgi_request_duration"))),
)
"""Every figure read, in ``model.schema``'s names; the histograms' are ``SERVING_HISTOGRAMS``."""


def engine_name(metric: str, engine: Engine | None) -> str:
    """The engine's own names of an engine-neutral figure, for messages ("vllm:kv_cache_usage_perc or
    vllm:gpu_cache_usage_perc"; SGLang's ``sglang_`` respelling left out); the neutral name where the engine has
    none or is unknown."""
    spec = next((m for m in ENGINE_METRICS if m.metric == metric), None)
    if spec is None:
        return metric
    names = [name for name, e in spec.names if e == engine and not name.startswith("sglang_")]
    return " or ".join(names) or metric


def bucket_bound(le: str) -> float | None:
    """A histogram bucket's bound as a number (``+Inf``, ``Inf`` and ``+inf`` are infinite); None when the text of
    ``le`` is none (``abc``, ``NaN``)."""
    try:
        value = float(le.strip())
    except ValueError:
        return None
    return None if math.isnan(value) else value


def shown_label(text: str, limit: int = 24) -> str:
    """A label value or metric name of a server, made safe to quote in one line: every character Python does not
    call printable is a space, a double quote a single one, at most ``limit`` characters."""
    return "".join(c if c.isprintable() else " " for c in text[:limit]).replace('"', "'")

