"""What a serving team can change, from its server's metrics, with the dollars each would have saved over the window.

Each recommendation names the metric behind it, in the engine's own words (``model.serving_names``):

- over-provisioned: the GPUs mostly idle (busy under ``IDLE_BUSY``), no request ever waited, the KV cache mostly
  empty (under ``KV_ROOM`` at its fullest): fewer replicas, a smaller GPU or a MIG slice. The load needs
  ``busy / SLICE_TARGET_BUSY`` of the GPU-hours (the headroom slices and shared GPUs are sized with), so the rest of
  the cost is what it saves;
- under-batched: requests waited (``WAITING_MIN`` on average) while the KV cache had room (under ``KV_FULL`` at its
  fullest): the engine's batch limit, not memory, held them back; raise ``max_num_seqs`` / ``--max-running-requests``.
  Decode steps take about as long for a larger batch (they read the weights once whatever the batch), so serving the
  waiting requests in the same steps needs ``waiting / (running + waiting)`` fewer GPU-hours;
- KV-bound: the cache was full (``KV_FULL``) while requests waited: more memory per replica, a quantised KV cache or
  tensor parallelism. An fp8 cache holds twice the tokens, so up to twice the running batch: the same reasoning with
  the batch growth capped at double.

Pure: metrics in, recommendations out.
"""

from __future__ import annotations

from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.slices import SLICE_TARGET_BUSY
from gpuscope.model.diagnosis import Recommendation
from gpuscope.model.schema import SERVING_KV_CACHE_USAGE, SERVING_REQUESTS_RUNNING, SERVING_REQUESTS_WAITING
from gpuscope.model.serving import Engine, ServingMetrics
from gpuscope.model.serving_names import engine_name

IDLE_BUSY = 0.4
KV_ROOM = 0.5
KV_FULL = 0.9
WAITING_MIN = 1.0
_BATCH_KNOB: dict[Engine | None, str] = {
    "vllm": "vLLM --max-num-seqs (and --max-num-batched-tokens)",
    "sglang": "SGLang --max-running-requests",
    "tgi": "TGI --max-batch-total-tokens (and --max-concurrent-requests)",
    None: "the engine's batch limit (vLLM --max-num-seqs, SGLang --max-running-requests, TGI "
          "--max-batch-total-tokens)",
}
_KV_FIXES: dict[Engine | None, str] = {
    "vllm": "raise --gpu-memory-utilization or move to a GPU with more memory, quantise the cache "
            "(--kv-cache-dtype fp8), or split the model over GPUs (--tensor-parallel-size 2) so each holds more cache",
    "sglang": "raise --mem-fraction-static or move to a GPU with more memory, quantise the cache "
              "(--kv-cache-dtype fp8_e5m2), or split the model over GPUs (--tp 2) so each holds more cache",
}


def advise(metrics: ServingMetrics, *, who: str, cost_usd: float | None, busy_metric: str) -> list[Recommendation]:
    """The serving advice for one server or pod; ``cost_usd`` is what its GPUs cost over the window (None when
    unknown: then no dollars), ``busy_metric`` names where its GPU busy share came from."""
    out = [r for r in (_over_provisioned(metrics, who, cost_usd, busy_metric), _kv_bound(metrics, who, cost_usd))
           if r is not None]
    if not any(r.code == codes.SERVING_KV_BOUND for r in out):
        under = _under_batched(metrics, who, cost_usd)
        out.extend([under] if under is not None else [])
    return out


def _named(metric: str, m: ServingMetrics) -> str:
    return engine_name(metric, m.engine)


def _over_provisioned(m: ServingMetrics, who: str, cost: float | None, busy_metric: str) -> Recommendation | None:
    busy, waiting_max, kv_max = m.gpu_busy, m.requests_waiting_max, m.kv_cache_usage_max
    if busy is None or busy >= IDLE_BUSY or waiting_max is None or waiting_max >= WAITING_MIN:
        return None
    if kv_max is not None and kv_max >= KV_ROOM:
        return None
    share = max(0.0, 1.0 - busy / SLICE_TARGET_BUSY)
    kv = (f", and its KV cache was at most {kv_max:.0%} full ({_named(SERVING_KV_CACHE_USAGE, m)})"
          if kv_max is not None else "")
    return Recommendation(
        code=codes.SERVING_OVERPROVISIONED,
        title=f"{who}: over-provisioned: fewer replicas, a smaller GPU or a MIG slice",
        detail=(f"Its GPUs were busy {busy:.0%} of the time ({busy_metric}), no request waited "
                f"({_named(SERVING_REQUESTS_WAITING, m)} at most {waiting_max:g}){kv}: the load fits in "
                f"{busy / SLICE_TARGET_BUSY:.0%} of the GPU-hours. Run fewer replicas (let the autoscaler's minimum "
                f"drop), serve from a smaller GPU, or give it a MIG slice (or MPS) and share the rest."),
        est_step_saving=None, est_saving_usd=cost * share if cost is not None else None,
        reasoning=(f"busy {busy:.3f} / target {SLICE_TARGET_BUSY:g} = {busy / SLICE_TARGET_BUSY:.3f} of the GPU-hours "
                   f"carry the load; the other {share:.1%} of the window's cost is saved."),
        stage="idle")


def _under_batched(m: ServingMetrics, who: str, cost: float | None) -> Recommendation | None:
    running, waiting, kv_max = m.requests_running, m.requests_waiting, m.kv_cache_usage_max
    if waiting is None or waiting < WAITING_MIN or running is None or kv_max is None or kv_max >= KV_FULL:
        return None
    share = waiting / (running + waiting)
    return Recommendation(
        code=codes.SERVING_UNDER_BATCHED,
        title=f"{who}: under-batched: raise the running-request limit",
        detail=(f"{waiting:.1f} requests waited on average ({_named(SERVING_REQUESTS_WAITING, m)}) beside "
                f"{running:.1f} running ({_named(SERVING_REQUESTS_RUNNING, m)}) while the KV cache was at most "
                f"{kv_max:.0%} full ({_named(SERVING_KV_CACHE_USAGE, m)}): the batch limit, not memory, held them "
                f"back. Raise {_BATCH_KNOB[m.engine]} so they join the running batch."),
        est_step_saving=None, est_saving_usd=cost * share if cost is not None else None,
        reasoning=(f"A decode step costs about the same for a larger batch; serving the {waiting:.1f} waiting "
                   f"requests beside the {running:.1f} running ones needs {share:.1%} fewer GPU-hours "
                   f"({waiting:.1f} / {running + waiting:.1f})."),
        stage="host_overhead")


def _kv_bound(m: ServingMetrics, who: str, cost: float | None) -> Recommendation | None:
    running, waiting, kv_max = m.requests_running, m.requests_waiting, m.kv_cache_usage_max
    if kv_max is None or kv_max < KV_FULL or waiting is None or waiting < WAITING_MIN or running is None:
        return None
    joined = min(waiting, running)
    share = joined / (running + joined) if running + joined > 0 else 0.0
    fixes = _KV_FIXES.get(m.engine) or _KV_FIXES["vllm"]
    return Recommendation(
        code=codes.SERVING_KV_BOUND,
        title=f"{who}: KV-cache bound: more memory per replica, an fp8 KV cache or tensor parallelism",
        detail=(f"The KV cache was {kv_max:.0%} full ({_named(SERVING_KV_CACHE_USAGE, m)}) while {waiting:.1f} "
                f"requests waited on average ({_named(SERVING_REQUESTS_WAITING, m)}): the cache, not the batch "
                f"limit, holds the batch at {running:.1f} ({_named(SERVING_REQUESTS_RUNNING, m)}). {fixes[0].upper()}"
                f"{fixes[1:]}."),
        est_step_saving=None, est_saving_usd=cost * share if cost is not None else None,
        reasoning=(f"An fp8 cache holds twice the tokens: the batch can grow by min(waiting {waiting:.1f}, running "
                   f"{running:.1f}) = {joined:.1f}, so the same tokens need {share:.1%} fewer GPU-hours."),
        stage="memory")
