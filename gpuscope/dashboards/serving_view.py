"""The dashboard's serving view: a run's server (tokens, load, latency, cost per token), its phases and graph
replays; a fleet's serving pods. Every label goes in as text (React escapes it; a table's cells go through
``grid.cells``)."""

from __future__ import annotations

from dash.development.base_component import Component

from gpuscope.dashboards import grid
from gpuscope.dashboards.components import card, chart, kv_table
from gpuscope.figures.serving import phase_shares, pod_token_costs
from gpuscope.format import ms, num, pct, tokens_per_s, usd, usd_small
from gpuscope.model.serving import Latency, ServingMetrics, ServingPod, ServingReport


def run_serving(serving: ServingReport, *, revision: str) -> list[Component]:
    """The run page's serving card and phase chart."""
    parts: list[Component] = []
    if serving.metrics is not None:
        parts.append(kv_table(metric_rows(serving.metrics, serving.source), table_id="serving-metrics"))
    if serving.phases:
        parts.append(_table("serving-phases", [
            {"phase": name, "share": pct(p.share), "steps": p.steps, "step": ms(p.step_time_us),
             "GPU busy": pct(p.gpu_busy), "held back by": p.bottleneck or "n/a",
             "tokens/step": num(p.tokens_per_step, digits=0)} for name, p in serving.phases.items()]))
    if serving.graphs:
        parts.append(_table("serving-graphs", [
            {"graph": g.name, "replays": g.replays, "kernels each": num(g.kernels_per_replay, digits=0),
             "GPU time": ms(g.gpu_time_us), "kernels recorded": "yes" if g.recorded else "no (estimated)",
             "top operator or kernel": (g.operators[0].name if g.operators else g.kernels[0].name if g.kernels
                                        else "n/a")[:80]} for g in serving.graphs]))
    out: list[Component] = [card("Serving", *parts, class_name="serving")]
    if serving.phases:
        out.append(chart("serving-phases", phase_shares(serving), revision=revision))
    return out


def fleet_serving(pods: tuple[ServingPod, ...], *, revision: str) -> list[Component]:
    """The fleet page's serving pods: a table and what a million output tokens cost on each."""
    rows: list[dict[str, object]] = [_pod_row(p) for p in pods]
    return [card("Serving pods", _table("fleet-serving", rows)),
            chart("fleet-serving-cost", pod_token_costs(pods), revision=revision)]


def _pod_row(p: ServingPod) -> dict[str, object]:
    m = p.metrics
    return {"pod": p.name, "engine": m.engine or "n/a", "output": tokens_per_s(m.output_tokens_per_s),
            "prompt": tokens_per_s(m.prompt_tokens_per_s), "$/M output": usd_small(m.usd_per_million_output_tokens),
            "$/M blended": usd_small(m.usd_per_million_tokens), "cost": usd(p.cost_usd),
            "running": num(m.requests_running), "waiting": num(m.requests_waiting),
            "KV cache": pct(m.kv_cache_usage, 0), "TTFT p50": _p(m.ttft, "p50_s"), "TTFT p99": _p(m.ttft, "p99_s"),
            "J/token": num(m.joules_per_output_token, digits=3), "GPU busy": pct(m.gpu_busy)}


def metric_rows(m: ServingMetrics, source: str | None) -> list[tuple[str, str]]:
    return [("server", f"{m.engine or 'n/a'} · {source or 'n/a'}"),
            ("output tokens", tokens_per_s(m.output_tokens_per_s)),
            ("prompt tokens", tokens_per_s(m.prompt_tokens_per_s)),
            ("$ per million output tokens", usd_small(m.usd_per_million_output_tokens)),
            ("$ per million prompt tokens", usd_small(m.usd_per_million_prompt_tokens)),
            ("$ per million tokens (blended)", usd_small(m.usd_per_million_tokens)),
            ("requests running / waiting", f"{num(m.requests_running)} / {num(m.requests_waiting)}"),
            ("KV cache used (peak)", f"{pct(m.kv_cache_usage, 0)} ({pct(m.kv_cache_usage_max, 0)})"),
            ("TTFT p50 / p99", f"{_p(m.ttft, 'p50_s')} / {_p(m.ttft, 'p99_s')}"),
            ("inter-token p50 / p99", f"{_p(m.inter_token_latency, 'p50_s')} / {_p(m.inter_token_latency, 'p99_s')}"),
            ("joules per output token", num(m.joules_per_output_token, " J", 3)),
            ("GPU busy", pct(m.gpu_busy))]


def _p(lat: Latency | None, field: str) -> str:
    value = getattr(lat, field) if lat is not None else None
    return ms(value * 1e6 if value is not None else None)


def _table(table_id: str, rows: list[dict[str, object]]) -> Component:
    return grid.dict_table(table_id, rows, filters=False)
