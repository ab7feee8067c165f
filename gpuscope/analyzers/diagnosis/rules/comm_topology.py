"""Communication over a far PCIe path: GPUs of one job that meet only at the host bridge or across CPU sockets
(live runs, from the peer paths NVML reported), and which GPUs to use together instead.

The expected gain comes from link speeds: peer to peer under one PCIe switch, NCCL's collectives reach about
``P2P_EFFICIENCY`` of the GPUs' PCIe link per direction (nccl-tests' bus bandwidth on large messages); the
collectives measured today move ``busbw``. The same bytes then take ``busbw / attainable`` of today's time, and
the exposed communication shrinks with them: ``saving = share x (1 - busbw / attainable)``, none when the
collectives already reach it (the path is not what holds them back). docs/diagnosis.md has the worked example.
"""

from __future__ import annotations

from gpuscope.analyzers.advice.vendor import Words
from gpuscope.analyzers.diagnosis import codes
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput, finding, severity
from gpuscope.analyzers.diagnosis.links import Link, bus_bandwidth, pcie_link
from gpuscope.analyzers.diagnosis.savings import Saving
from gpuscope.analyzers.diagnosis.topology import P2P_LEVEL, WORDS, Placement, placement
from gpuscope.model.diagnosis import Recommendation

P2P_EFFICIENCY = 0.7
"""Share of a PCIe link's per-direction bandwidth that NCCL's P2P transport reaches under one switch on large
messages (nccl-tests report about 70-85%; the low end, so the gain is not overstated)."""


def apply(ctx: Context, share: float) -> RuleOutput:
    """Topology advice for a job whose communication share is ``share`` (already past the rule's threshold)."""
    place = placement(ctx.run.meta.gpus)
    if place is None:
        return RuleOutput()
    job = [g for g in ctx.run.meta.gpus if g.index in place.gpus]
    links = [link for link in (pcie_link(g) for g in job) if link is not None]
    link = min(links, key=lambda x: x.gbps) if links else None
    moved = bus_bandwidth(ctx.ranks)
    busbw = moved.gbps if moved is not None else None
    saving = _saving(share, busbw, link) if place.closer is not None else None
    if saving is not None and saving.fraction <= 0:
        return RuleOutput()  # the collectives already reach what P2P would: the path is not the limit
    rec = _recommendation(place, saving, ctx.words)
    a, b = place.pair
    evidence: dict[str, float | int | str | None] = {
        "gpus": ",".join(map(str, place.gpus)), "path": place.path, "path_gpus": f"{a},{b}",
        "closer_gpus": ",".join(map(str, place.closer)) if place.closer is not None else None,
        "link": link.name if link is not None else None, "link_gbps": link.gbps if link is not None else None,
        "busbw_gbps": busbw, "communication_share": share,
    }
    title = f"GPUs {a} and {b} of this job exchange collectives {WORDS[place.path]}, without NVLink"
    return RuleOutput((finding(codes.COMM_TOPOLOGY, severity(share, warning=0.15, critical=0.30), title, evidence,
                               share=share, recs=[rec], stage="communication"),), (rec,))


def _saving(share: float, busbw: float | None, link: Link | None) -> Saving | None:
    if busbw is None or link is None:
        return None
    attainable = P2P_EFFICIENCY * link.gbps
    fraction = min(max(share * (1.0 - busbw / attainable), 0.0), share)
    return Saving(fraction, (
        f"Exposed communication is {share:.1%} of the step, its collectives moving {busbw:.1f} GB/s of bus "
        f"bandwidth. Peer to peer under one PCIe switch they reach about {P2P_EFFICIENCY:.0%} of the GPUs' "
        f"{link.name} ({link.gbps:.1f} GB/s per direction), {attainable:.1f} GB/s, so the same bytes take "
        f"{busbw / attainable:.2f} of today's time: {share:.1%} x (1 - {busbw:.1f} / {attainable:.1f}) = "
        f"{fraction:.1%}."))


def _recommendation(place: Placement, saving: Saving | None, w: Words) -> Recommendation:
    a, b = place.pair
    why = (f"GPUs {a} and {b} meet only {WORDS[place.path]}, where {w.collectives} by default does not go peer to "
           "peer (on most CPUs it allows P2P through PCIe switches only) and stages their collectives through host "
           "memory.")
    if place.closer is not None:
        gpus = ",".join(map(str, place.closer))
        reasoning = saving.reasoning if saving is not None else (
            "Not estimated: no collective in the trace recorded its message size (record a profiler trace with "
            "record_shapes, PyTorch 2.x), so the bandwidth gained is unknown.")
        return Recommendation(
            codes.GPU_PLACEMENT, f"Run the job on GPUs {gpus}: they talk through PCIe switches, not the CPU",
            f"{why} GPUs {gpus} of this machine sit under PCIe switches only, where collectives go peer to peer: "
            f"start the job on them when they are free ({w.visible_devices}={gpus}, or ask the scheduler for GPUs "
            "under one switch).", saving.fraction if saving is not None else None, reasoning, stage="communication")
    level = P2P_LEVEL[place.path]
    return Recommendation(
        codes.GPU_PLACEMENT,
        f"Let {w.collectives} send peer to peer across the host bridge (NCCL_P2P_LEVEL={level})",
        f"{why} No {len(place.gpus)} GPUs of this machine share a PCIe switch (`{w.topology}` shows the paths). "
        f"Set NCCL_P2P_LEVEL={level}{' (RCCL reads the NCCL_ variables)' if w.vendor == 'amd' else ''} so it uses "
        f"direct P2P that far, and compare {w.collective_tests}' all_reduce_perf with and without it first: P2P "
        "through some CPUs' root complex is slower than staging. Or fit the job on fewer GPUs.", None,
        "Not estimated: how fast P2P runs through the CPU's root complex depends on the CPU, not on the GPUs' links.",
        stage="communication")
