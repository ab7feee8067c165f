"""The serving figures as the views show them (``Report.serving``): the server's tokens, load, latency and cost per
token, the prefill and decode phases of its traces, and its CUDA/HIP graph replays. The lines and rows are made
here once; the terminal's panel is here, the HTML report's section in ``html_serving``."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuscope.format import ms, num, pct, tokens_per_s, usd_small
from gpuscope.model.serving import Latency, ServingMetrics, ServingReport

MAX_GRAPHS = 5
_HELD_BACK = {"host": "host (launches)", "gpu": "GPU", "gpu_wait": "GPU-side wait"}
PHASE_COLUMNS = ("phase", "share", "steps", "step", "GPU busy", "held back by", "tokens/step")
GRAPH_COLUMNS = ("graph", "replays", "kernels each", "GPU time", "kernels recorded", "top kernel")
GRAPHS_TITLE = "CUDA/HIP graph replays (GPU time of their kernels, never idle)"


def serving_panel(serving: ServingReport) -> RenderableType:
    parts: list[RenderableType] = []
    if serving.metrics is not None:
        head, *lines = metric_lines(serving.metrics, serving.source)
        parts += [Text(head, style="bold"), Text(lines[0]), Text(lines[1]), Text(lines[2], style="dim")]
    if serving.phases:
        parts.append(_table(phases_title(serving), PHASE_COLUMNS, phase_rows(serving), left={0}))
    if serving.graphs:
        parts.append(_table(GRAPHS_TITLE, GRAPH_COLUMNS, graph_rows(serving), left={0, 5}))
    return Panel(Group(*parts), title="Serving", border_style="blue")


def latency_text(name: str, lat: Latency | None) -> str:
    if lat is None:
        return f"{name} n/a"
    def s(v: float | None) -> str:
        return ms(v * 1e6 if v is not None else None)
    return f"{name} p50 {s(lat.p50_s)} · p90 {s(lat.p90_s)} · p99 {s(lat.p99_s)}"


def metric_lines(m: ServingMetrics, source: str | None) -> list[str]:
    """The server, then its tokens and load, its cost per token, and its latency: one line each."""
    engine = f"{m.engine} " if m.engine else ""
    return [
        f"{engine}server" + (f"  {source}" if source else ""),
        f"output {tokens_per_s(m.output_tokens_per_s)} · prompt {tokens_per_s(m.prompt_tokens_per_s)} · "
        f"running {num(m.requests_running)} · waiting {num(m.requests_waiting)} (peak "
        f"{num(m.requests_waiting_max)}) · KV cache {pct(m.kv_cache_usage, 0)} (peak {pct(m.kv_cache_usage_max, 0)})",
        f"per million tokens output {usd_small(m.usd_per_million_output_tokens)} · prompt "
        f"{usd_small(m.usd_per_million_prompt_tokens)} · blended {usd_small(m.usd_per_million_tokens)} · "
        f"{num(m.joules_per_output_token, ' J', 3)} per output token",
        " · ".join(latency_text(n, lat) for n, lat in (("TTFT", m.ttft), ("inter-token", m.inter_token_latency),
                                                       ("end to end", m.e2e_latency))),
    ]


def phases_title(serving: ServingReport) -> str:
    how = {"engine_ranges": "the engine's step ranges", "attention_kernels": "the attention kernels"}
    source = " + ".join(how.get(s, s) for s in (serving.phase_source or "").split("+") if s)
    return f"Phases (steps told apart by {source or 'n/a'})"


def phase_rows(serving: ServingReport) -> list[list[str]]:
    return [[name, pct(p.share), str(p.steps), ms(p.step_time_us), pct(p.gpu_busy),
             _HELD_BACK.get(p.bottleneck or "", "n/a"), num(p.tokens_per_step, digits=0)]
            for name, p in serving.phases.items()]


def graph_rows(serving: ServingReport) -> list[list[str]]:
    rows = []
    for g in serving.graphs[:MAX_GRAPHS]:
        top = g.operators[0].name if g.operators else g.kernels[0].name if g.kernels else "n/a"
        rows.append([g.name, str(g.replays), num(g.kernels_per_replay, digits=0), ms(g.gpu_time_us),
                     "yes" if g.recorded else "no (estimated)", top[:60] + ("…" if len(top) > 60 else "")])
    return rows


def _table(title: str, columns: tuple[str, ...], rows: list[list[str]], *, left: set[int]) -> Table:
    table = Table(title=Text(title), title_justify="left", box=None, header_style="bold")
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i in left else "right", overflow="fold")
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # names from the trace are text, never markup
    return table
