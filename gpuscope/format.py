"""How numbers read in every human-facing view (terminal, figures, dashboard, reports): one module, so they agree
to the digit. Unknown is "n/a", never 0; shares are fractions in data and percent only here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuscope.model.report import CostReport, GpuShare, RankReport, Recommendation

_UNIT_SUFFIXES = ("_bytes_per_s", "_us", "_bytes", "_usd")
"""Evidence keys whose unit the printed value carries: the key is shown without it."""


def pct(share: float | None, digits: int = 1) -> str:
    return "n/a" if share is None else f"{share * 100:.{digits}f}%"


def ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def usd(value: float | None) -> str:
    """Dollars: whole above $100, cents above a cent, four decimals for the fractions of a cent a profiler sample
    costs; an exact zero is $0.00."""
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:.4f}"


def saving_text(rec: Recommendation, cost: CostReport | None) -> str:
    """What a recommendation saves, as every view prints it: the share of step time, then dollars."""
    parts = [f"saves ~{pct(rec.est_step_saving, 0)} of step time"] if rec.est_step_saving is not None else []
    money = saving_usd_text(rec, cost)
    if money:
        parts.append(money)
    return ", ".join(parts) or "saving n/a"


def saving_usd_text(rec: Recommendation, cost: CostReport | None) -> str | None:
    """A recommendation's dollars: for the job (projected) or this run when a cent or more; a saving too small to
    show that way (a few seconds of trace) per 1,000 steps, else per hour of the job's GPUs, never as $0.00."""
    saved = rec.est_saving_usd
    if saved is None:
        return None
    if abs(saved) >= 0.01 or cost is None:
        return f"~{usd(saved)}" + ("" if cost is None else " over the job" if cost.projected_usd is not None
                                   else " on this run")
    if rec.est_step_saving is not None and cost.per_1k_steps_usd is not None \
            and rec.est_step_saving * cost.per_1k_steps_usd >= 0.01:
        return f"~{usd(rec.est_step_saving * cost.per_1k_steps_usd)} per 1,000 steps"
    base = cost.projected_usd if cost.projected_usd is not None else cost.total_usd
    if base and cost.usd_per_gpu_hour:
        per_hour = saved / (base / cost.usd_per_gpu_hour) * (cost.gpu_count or 1)
        if abs(per_hour) >= 0.01:
            return f"~{usd(per_hour)} per hour"
    return f"~{usd(saved)} on this run"


def gib(nbytes: int | float | None) -> str:
    return "n/a" if nbytes is None else f"{nbytes / 2**30:.1f} GiB"


def rate(bytes_per_s: float | None) -> str:
    if bytes_per_s is None:
        return "n/a"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if abs(bytes_per_s) >= size:
            return f"{bytes_per_s / size:.1f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


def num(value: float | int | None, unit: str = "", digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return f"{value:,}{unit}"
    return f"{value:,.{digits}f}{unit}"


def evidence_value(key: str, value: float | int | str | None) -> str:
    """Render an evidence entry by the unit its name carries."""
    if value is None:
        return "n/a"
    if isinstance(value, str):
        return value
    if key.endswith(("_share", "_fraction", "_util", "_ratio", "busy", "overlap", "confidence")):
        return pct(float(value))
    if key.endswith("_bytes_per_s"):
        return rate(float(value))
    if key.endswith("_us"):
        return ms(float(value))
    if key.endswith("_bytes"):
        return gib(value)
    if key.endswith("_usd"):
        return usd(float(value))
    return num(value, digits=2)


def workload_line(ranks: Sequence[RankReport]) -> str | None:
    """"training" / "inference" per the ranks' traces (with what decided it), or None when no rank can tell."""
    kinds = sorted({r.workload for r in ranks if r.workload is not None})
    if not kinds:
        return None
    why = next((r.workload_evidence for r in ranks if r.workload_evidence), "")
    return " and ".join(kinds) + (f" ({why})" if why and len(kinds) == 1 else "")


def evidence_item(key: str, value: float | int | str | None) -> str:
    """``name=value`` with the unit in the value, not twice (``step_time=177.6 ms``, not ``step_time_us=177.6 ms``)."""
    label = next((key.removesuffix(s) for s in _UNIT_SUFFIXES if key.endswith(s) and value is not None
                  and not isinstance(value, str)), key)
    return f"{label}={evidence_value(key, value)}"


def gpu_model(name: str | None, mig_profile: str | None = None) -> str:
    """A GPU as the views name it: its model, and for a MIG instance its profile ("NVIDIA H100 80GB HBM3 MIG
    1g.10gb", as nvidia-smi names an instance)."""
    model = name or "unknown GPU"
    return f"{model} MIG {mig_profile}" if mig_profile else model


def gpus_line(gpus: Sequence[tuple[str | None, str | None]]) -> str:
    """"2 x NVIDIA H100 80GB HBM3" from (model, MIG profile) pairs; "no GPU recorded" without any."""
    if not gpus:
        return "no GPU recorded"
    return f"{len(gpus)} x {', '.join(sorted({gpu_model(name, mig) for name, mig in gpus}))}"


def container_line(tags: dict[str, str]) -> str | None:
    """Where a live run's target ran, from its tags: "pod ml/train-0 (uid ...) · containerd container 3f2a1b4c5d6e";
    None outside a container."""
    parts = []
    if tags.get("pod.name") or tags.get("pod.uid"):
        pod = "/".join(v for v in (tags.get("pod.namespace"), tags.get("pod.name")) if v) or "unnamed"
        parts.append(f"pod {pod}" + (f" (uid {tags['pod.uid']})" if tags.get("pod.uid") else ""))
    if tags.get("container.id"):
        parts.append(" ".join(v for v in (tags.get("container.runtime"), "container", tags["container.id"]) if v))
    return " · ".join(parts) or None


def price_line(usd_per_gpu_hour: float | None, source: str | None, *, share_basis: str | None = None,
               whole_usd_per_gpu_hour: float | None = None) -> str:
    """"at $6.88/GPU-h, catalog: ..."; for MIG instances, the share of their GPU's price it is and why."""
    text = f"at {usd(usd_per_gpu_hour)}/GPU-h" if usd_per_gpu_hour is not None else "no price"
    if share_basis:
        text += f" ({share_basis}, of {usd(whole_usd_per_gpu_hour)}/GPU-h)"
    return text + (f", {source}" if source else "")


def shared_gpu_line(share: GpuShare) -> str:
    """"GPU 0, shared with 1 other process: this job 0.4% of SM time, 6.6 of 140.4 GiB; GPU busy 98.1%"."""
    others = share.other_processes_max
    with_whom = f"{others} other process{'es' if others != 1 else ''}" if others is not None else "other processes"
    own, total = share.own_memory_peak_bytes, share.memory_total_bytes
    memory = f"{gib(own).removesuffix(' GiB')} of {gib(total)}" if own is not None and total else gib(own)
    return (f"GPU {share.gpu}, shared with {with_whom}: this job {pct(share.own_sm_mean)} of SM time, {memory}; "
            f"GPU busy {pct(share.gpu_busy_mean)}")


_SPLIT = {"measured": "split by measured SM use", "even": "split evenly between the processes",
          "mixed": "split by measured SM use where NVML gave it, evenly otherwise"}


def shared_cost_line(own_usd: float | None, held_usd: float | None, basis: str | None,
                     neighbours_usd: float | None) -> str:
    """"this job's share $0.0004 of the GPU's $0.047 while it held it (split by measured SM use); ..."."""
    split = f" ({_SPLIT[basis]})" if basis in _SPLIT else ""
    others = f"; the other processes' kernels ran for {usd(neighbours_usd)} of it" if neighbours_usd is not None else ""
    return f"this job's share {usd(own_usd)} of the GPU's {usd(held_usd)} while it held it{split}{others}"
