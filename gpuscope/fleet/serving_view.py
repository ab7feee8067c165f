"""The fleet terminal's serving table: each serving pod's tokens, load, latency and what a million tokens cost on
its own GPUs (``FleetReport.serving``)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from gpuscope.format import ms, num, pct, tokens_per_s, usd, usd_small
from gpuscope.model.serving import ServingPod

MAX_PODS = 20


def serving_table(pods: tuple[ServingPod, ...]) -> RenderableType:
    table = Table(title=Text("Serving pods, most output tokens first"), title_justify="left", box=None,
                  header_style="bold")
    for col in ("pod", "engine", "out", "prompt", "$/M out", "$/M all", "cost", "running", "waiting", "KV cache",
                "TTFT p50/p99", "J/token"):
        table.add_column(Text(col), justify="left" if col in ("pod", "engine") else "right", overflow="fold")
    for p in pods[:MAX_PODS]:
        m = p.metrics
        ttft = f"{ms(m.ttft.p50_s * 1e6 if m.ttft and m.ttft.p50_s is not None else None)} / " \
               f"{ms(m.ttft.p99_s * 1e6 if m.ttft and m.ttft.p99_s is not None else None)}" if m.ttft else "n/a"
        table.add_row(Text(p.name), Text(m.engine or "n/a"), tokens_per_s(m.output_tokens_per_s),
                      tokens_per_s(m.prompt_tokens_per_s), usd_small(m.usd_per_million_output_tokens),
                      usd_small(m.usd_per_million_tokens), usd(p.cost_usd), num(m.requests_running),
                      num(m.requests_waiting), pct(m.kv_cache_usage, 0), ttft,
                      num(m.joules_per_output_token, " J", 3))
    if len(pods) > MAX_PODS:
        table.caption = f"{len(pods) - MAX_PODS} more pods in --json"
    return table
