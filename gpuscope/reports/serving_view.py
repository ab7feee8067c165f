"""The terminal's serving panel (``Report.serving``): the server's tokens, load, latency and cost per token, the
prefill and decode phases of its traces, and its CUDA/HIP graph replays."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.format import ms, num, pct, tokens_per_s, usd_small
from gpuscope.model.serving import Latency, ServingMetrics, ServingReport

MAX_GRAPHS = 5


def serving_panel(serving: ServingReport) -> RenderableType:
    parts: list[RenderableType] = []
    if serving.metrics is not None:
        parts.extend(_metrics(serving.metrics, serving.source))
    if serving.phases:
        parts.append(_phases(serving))
    if serving.graphs:
        parts.append(_graphs(serving))
    return Panel(Group(*parts), title="Serving", border_style="blue")


def latency_text(name: str, lat: Latency | None) -> str:
    if lat is None:
        return f"{name} n/a"
    def s(v: float | None) -> str:
        return ms(v * 1e6 if v is not None else None)
    return f"{name} p50 {s(lat.p50_s)} · p90 {s(lat.p90_s)} · p99 {s(lat.p99_s)}"


def _metrics(m: ServingMetrics, source: str | None) -> list[RenderableType]:
    engine = f"{m.engine} " if m.engine else ""
    return [
        Text.assemble((f"{engine}server", "bold"), f"  {source}" if source else ""),
        Text(f"output {tokens_per_s(m.output_tokens_per_s)} · prompt {tokens_per_s(m.prompt_tokens_per_s)} · "
             f"running {num(m.requests_running)} · waiting {num(m.requests_waiting)} (peak "
             f"{num(m.requests_waiting_max)}) · KV cache {pct(m.kv_cache_usage, 0)} (peak "
             f"{pct(m.kv_cache_usage_max, 0)})"),
        Text.assemble(("per million tokens ", "bold"), f"output {usd_small(m.usd_per_million_output_tokens)} · "
                      f"prompt {usd_small(m.usd_per_million_prompt_tokens)} · blended "
                      f"{usd_small(m.usd_per_million_tokens)} · {num(m.joules_per_output_token, ' J', 3)} per "
                      f"output token"),
        Text(" · ".join(latency_text(n, lat) for n, lat in (("TTFT", m.ttft), ("inter-token", m.inter_token_latency),
                                                              ("end to end", m.e2e_latency))), style="dim"),
    ]


def _phases(serving: ServingReport) -> RenderableType:
    how = {"engine_ranges": "the engine's step ranges", "attention_kernels": "the attention kernels"}
    source = " + ".join(how.get(s, s) for s in (serving.phase_source or "").split("+") if s)
    table = Table(title=Text(f"Phases (steps told apart by {source or 'n/a'})"), title_justify="left", box=None,
                  header_style="bold")
    for col in ("phase", "share", "steps", "step", "GPU busy", "held back by", "tokens/step"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for name, p in serving.phases.items():
        table.add_row(name, pct(p.share), str(p.steps), ms(p.step_time_us), pct(p.gpu_busy),
                      {"host": "host (launches)", "gpu": "GPU"}.get(p.bottleneck or "", "n/a"),
                      num(p.tokens_per_step, digits=0))
    return table


def _graphs(serving: ServingReport) -> RenderableType:
    table = Table(title=Text("CUDA/HIP graph replays (GPU time of their kernels, never idle)"), title_justify="left",
                  box=None, header_style="bold")
    for col in ("graph", "replays", "kernels each", "GPU time", "kernels recorded", "top kernel"):
        table.add_column(col, justify="left" if col in ("graph", "top kernel") else "right", overflow="fold")
    for g in serving.graphs[:MAX_GRAPHS]:
        top = g.operators[0].name if g.operators else g.kernels[0].name if g.kernels else "n/a"
        table.add_row(Text(g.name), str(g.replays), num(g.kernels_per_replay, digits=0), ms(g.gpu_time_us),
                      "yes" if g.recorded else "no (estimated)", Text(top[:60] + ("…" if len(top) > 60 else "")))
    return table
