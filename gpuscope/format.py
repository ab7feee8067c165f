"""How numbers read in every human-facing view (terminal, figures, dashboard, reports): one module, so they agree
to the digit. Unknown is "n/a", never 0; shares are fractions in data and percent only here."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar, cast

from gpuscope.model.cost import gpu_time as gpu_time  # analyses' reasoning writes GPU time the same way
from gpuscope.model.redact import redact_command, redact_text

if TYPE_CHECKING:
    from gpuscope.model.cost import CostReport
    from gpuscope.model.diagnosis import JobFacts, OutlierStep, Recommendation, RecurringSteps
    from gpuscope.model.efficiency import CeilingFlag
    from gpuscope.model.live import GpuShare
    from gpuscope.model.rank import RankReport

T = TypeVar("T")
_UNIT_SUFFIXES = ("_bytes_per_s", "_us", "_bytes", "_usd")
"""Evidence keys whose unit the printed value carries: the key is shown without it."""

_NOT_PLAIN_ASCII = re.compile("[^ -~]")
"""The characters a shown string is checked one by one for: all but printable ASCII."""
_MARKDOWN_SPECIAL = re.compile(r"""([\\`*_{}\[\]()<>#+\-.!|~&"':$@^])""")
"""The ASCII punctuation that Markdown, GitHub's Markdown or HTML give a meaning to: links, images, emphasis, code,
headings, lists, table cells, tags, entities, emoji codes, math, mentions, footnotes. CommonMark lets a backslash
escape each of them; the rest (``, ; = ? / %``) stays as it is, so the source still reads."""


def printable(text: object) -> str:
    """``text`` safe to show anywhere: each character Python does not call printable becomes a visible escape
    (``\\x1b``, ``\\u202e``), the rest stays as it is (accents, CJK, emoji). Escaped: C0 and C1 controls and DEL
    (every ANSI CSI and OSC sequence starts with ESC or CSI), line and paragraph separators, format characters (the
    bidirectional marks and overrides that reorder what a reader sees, "Trojan Source", CVE-2021-42574; zero-width
    and soft hyphens that hide a difference), separators other than the space, lone surrogates, private-use and
    unassigned code points. Every name that comes from a trace, a label, a command line or a user (kernels, GPUs,
    threads, pods, hosts, run names) goes through it before a view shows it."""
    shown = str(text)
    return shown if shown.isprintable() else _NOT_PLAIN_ASCII.sub(_escaped, shown)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable_all(value: T) -> T:
    """``value`` (a frozen dataclass tree: a Report, a RunMeta, a gate or fleet result) with every string in it,
    at any depth, made ``printable``: what a view does once at its entry, so each name it then shows reads the
    same in every part of it. Parts that hold nothing to change are kept as they are."""
    if isinstance(value, str):
        return cast(T, printable(value))
    if isinstance(value, tuple):
        items = tuple(printable_all(v) for v in value)
        return value if all(a is b for a, b in zip(items, value)) else cast(T, items)
    if isinstance(value, dict):
        pairs = {printable_all(k): printable_all(v) for k, v in value.items()}
        same = len(pairs) == len(value) and all(k in value and value[k] is v for k, v in pairs.items())
        return value if same else cast(T, pairs)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {}
        for f in dataclasses.fields(value):
            old = getattr(value, f.name)
            new = printable_all(old)
            if new is not old and f.init:
                changed[f.name] = new
        return dataclasses.replace(value, **changed) if changed else value
    return value


def without_credentials(text: str) -> str:
    """``text`` with every secret ``gpuscope.model.redact`` knows of masked (the user and password of every URL in
    it, secret query values, ``name=value`` pairs of secret names, the environment's secrets) as ``***``."""
    return redact_text(text)


def command_line(words: Sequence[str]) -> str:
    """A recorded command line as a view shows it: words joined by spaces, secrets masked
    (``gpuscope.model.redact.redact_command``)."""
    return " ".join(redact_command(words))


def markdown_text(text: object) -> str:
    """A user string as Markdown that reads as the same text: printable, on one line, with every Markdown and HTML
    character backslash-escaped, so no link, image, emphasis, table cell or tag can come out of it."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", printable(text))


def pct(share: float | None, digits: int = 1) -> str:
    return "n/a" if share is None else f"{share * 100:.{digits}f}%"


def ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"


def usd(value: float | None) -> str:
    """Dollars, the one way every view prints money: whole above $100, cents below; a non-zero amount under a
    cent is "<$0.01" (a view frames such sums per hour or per 1,000 steps instead); an exact zero is $0.00."""
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"${value:,.0f}"
    if 0 < abs(value) < 0.005:
        return "<$0.01" if value > 0 else "-<$0.01"
    return f"${value:,.2f}"


def usd_small(value: float | None) -> str:
    """Dollars for a unit price (per million tokens): cents from $1 up, tenths of a cent under it ("$0.626"), three
    significant digits under a cent ("$0.00432")."""
    if value is None:
        return "n/a"
    if abs(value) >= 1 or value == 0:
        return usd(value)
    return f"${value:.3f}" if abs(value) >= 0.01 else f"${value:.3g}"


def tokens_per_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f} tok/s" if value >= 10 else f"{value:.3g} tok/s"


def hourly_usd(cost: CostReport) -> float | None:
    """What the run's GPUs cost per hour of wall time (price x GPUs); None without a price."""
    if cost.usd_per_gpu_hour is None:
        return None
    return cost.usd_per_gpu_hour * (cost.gpu_count or 1)


JOB_LENGTH_HINT = "give the job's length with --job-hours H or --job-steps N to see what the whole job costs"


@dataclass(frozen=True)
class MoneyFrame:
    """How a view states a run's dollars: over the job when its length is known, else per hour of the run's GPUs
    when the run is shorter than an hour (a trace), else as they are."""

    label: str
    """"over the job", "per hour" or "on this run"."""
    factor: float
    """What the run's dollars are multiplied by to be stated that way."""


def money_frame(cost: CostReport) -> MoneyFrame:
    total = cost.total_usd
    if cost.projected_usd is not None and total:
        return MoneyFrame("over the job", cost.projected_usd / total)
    gpus = cost.gpu_count or 1
    if total and 0 < cost.gpu_hours < gpus:
        return MoneyFrame("per hour", gpus / cost.gpu_hours)
    return MoneyFrame("on this run", 1.0)


def saving_text(rec: Recommendation, cost: CostReport | None) -> str:
    """What a recommendation saves, as every view prints it: the share of step time (of the run's time, for the
    outlier steps' advice), then dollars."""
    of = "of the run's time" if rec.saving_basis == "run" else "of step time"
    parts = [f"saves ~{pct(rec.est_step_saving, 0)} {of}"] if rec.est_step_saving is not None else []
    money = saving_usd_text(rec, cost)
    if money:
        parts.append(money if parts else f"saves {money}")
    return ", ".join(parts) or "saving n/a"


def saving_usd_text(rec: Recommendation, cost: CostReport | None) -> str | None:
    """A recommendation's dollars, framed as the cost is (``money_frame``): over the job, per hour, or on this
    run; with the saving per 1,000 steps where the step share and the cost per 1,000 steps are known."""
    saved = rec.est_saving_usd
    if saved is None:
        return None
    if cost is None:
        return f"~{usd(saved)}"
    frame = money_frame(cost)
    # est_saving_usd is already over the job where the job is known (the cost model scales it so)
    scaled = saved if frame.label == "over the job" else saved * frame.factor
    parts = [f"~{usd(scaled)} {frame.label}"]
    if rec.est_step_saving is not None and rec.saving_basis == "step" and cost.per_1k_steps_usd is not None \
            and rec.est_step_saving * cost.per_1k_steps_usd >= 0.005:
        parts.append(f"~{usd(rec.est_step_saving * cost.per_1k_steps_usd)} per 1,000 steps")
    return ", ".join(parts)


def gib(nbytes: int | float | None) -> str:
    """Memory in GiB; under a tenth of one in MiB (never "0.0 GiB" for memory that was used)."""
    if nbytes is None:
        return "n/a"
    if 0 < abs(nbytes) < 2**30 / 10:
        return f"{nbytes / 2**20:.1f} MiB" if abs(nbytes) >= 2**20 / 10 else "<0.1 MiB"
    return f"{nbytes / 2**30:.1f} GiB"


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
        return printable(value)
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
    """An evidence entry in words, the unit in the value and not in the name: ``step time 177.6 ms`` for
    ``step_time_us``, ``GPU busy 56.6%`` for ``gpu_busy``, ``step time n/a`` when unknown."""
    return f"{evidence_label(key)} {evidence_value(key, value)}"


def evidence_label(key: str) -> str:
    """An evidence key as words: its unit suffix dropped (the value carries the unit), underscores as spaces,
    GPU, CPU and the like in capitals (``dataloader_share`` -> ``dataloader share``)."""
    label = next((key.removesuffix(s) for s in _UNIT_SUFFIXES if key.endswith(s)), key)
    words = [_CAPITALS.get(w, w) for w in label.split("_") if w]
    return " ".join(words) or key


_CAPITALS = {"gpu": "GPU", "cpu": "CPU", "sm": "SM", "tc": "tensor-core", "nccl": "NCCL", "io": "I/O", "h2d": "H2D",
             "d2h": "D2H", "dram": "DRAM", "mig": "MIG", "rss": "RSS", "pcie": "PCIe", "nvlink": "NVLink"}


def gpu_model(name: str | None, mig_profile: str | None = None) -> str:
    """A GPU as the views name it: its model, and for a MIG instance its profile ("NVIDIA H100 80GB HBM3 MIG
    1g.10gb", as nvidia-smi names an instance)."""
    model = name or "unknown GPU"
    return f"{model} MIG {mig_profile}" if mig_profile else model


def gpus_line(gpus: Sequence[tuple[str | None, str | None]], *, cpu_job: bool = False) -> str:
    """"2 x NVIDIA H100 80GB HBM3" from (model, MIG profile) pairs; without any, "CPU only" for a CPU job (a trace
    with no GPU activity) and "no GPU recorded" for any other run."""
    if not gpus:
        return "CPU only" if cpu_job else "no GPU recorded"
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


def step_line(facts: JobFacts) -> str | None:
    """The job's step time and how its steady steps spread, one line for every view: "46.6 ms per step (mean of
    all 12 steady steps; median 21.7 ms, p90 33.1 ms, spread 4.6 ms; typical step 22.7 ms without the outlier)";
    None without profiler steps. Every figure beside the step time names its statistic."""
    if facts.step_time_us is None:
        return None
    n = facts.steady_steps
    steps = f"all {n} steady steps" if n != 1 else "1 steady step"
    if facts.step_time_median_us is None:  # a report saved before the spread was computed
        return f"{ms(facts.step_time_us)} per step (mean of {steps})"
    if facts.outlier_threshold_us is None:  # fewer than 3 steady steps: no spread, no slow step to tell
        return f"{ms(facts.step_time_us)} per step (mean of {steps}; too few to tell a slow step)"
    line = (f"{ms(facts.step_time_us)} per step (mean of {steps}; median {ms(facts.step_time_median_us)}, p90 "
            f"{ms(facts.step_time_p90_us)}, spread {ms(facts.step_time_spread_us)}")
    if facts.outlier_step_count:
        line += f"; typical step {ms(facts.typical_step_us)} without the outlier"
    return line + ")"


def window_words(r: RankReport) -> str:
    """What a rank's window is: "whole window", and the steady window in it when start-up or warm-up precede it
    ("whole window; steady window 0.67 s after 0.35 s of start-up")."""
    steady = r.steady_window_us
    if steady is None or steady >= r.window_us * (1 - 1e-9):
        return "whole window"
    return f"whole window; steady window {ms(steady)} after {ms(r.window_us - steady)} of start-up"


def busy_window_words(r: RankReport) -> str:
    """The window a rank's GPU busy share is over: the steady window (named with its length when start-up or
    warm-up shorten it)."""
    steady = r.steady_window_us
    if steady is None or steady >= r.window_us * (1 - 1e-9):
        return "the whole window"
    return f"the steady window ({ms(steady)})"


def windows_line(facts: JobFacts, ranks: Sequence[RankReport], outlier_steps: Sequence[OutlierStep]) -> str | None:
    """Which figures are over which window, with their lengths: "step time, GPU busy and cost per step over the
    steady window (12 steps, 560.3 ms); stage shares and the verdict over the typical steps (11, without outlier
    step 18); the whole window 560.3 ms (HTA's idle time, the run's cost)" (a CPU job's: the step time alone, and
    its whole window); None without profiler steps."""
    if facts.step_time_us is None or not ranks:
        return None
    cpu_job = all(r.cpu_only for r in ranks)
    whole = max(r.window_us for r in ranks)
    steady = max((r.steady_window_us if r.steady_window_us is not None else r.window_us) for r in ranks)
    n = facts.steady_steps
    line = (f"{'step time' if cpu_job else 'step time, GPU busy and cost per step'} over the steady window ({n} "
            f"step{'s' if n != 1 else ''}, {ms(steady)}); stage shares and the verdict over the typical steps")
    if outlier_steps:
        line += (f" ({facts.typical_steps}, without outlier step "
                 f"{', '.join(printable(o.step) for o in outlier_steps)})")
    else:
        line += " (the same steps: no outlier)"
    start = f", after {ms(whole - steady)} of start-up" if whole - steady > whole * 1e-9 else ""
    return line + f"; the whole window {ms(whole)}{start}" + ("" if cpu_job else " (HTA's idle time, the run's cost)")


def recurring_line(r: RecurringSteps) -> str:
    """Slow steps that recur, as what they are: "every 4th step +60.0 ms: +15.0 ms a step on average" (over the
    median of the other steps)."""
    if r.period is not None and r.per_period == 1:
        what = f"every {ordinal(r.period)} step"
    elif r.period is not None:
        what = f"{r.per_period} of every {r.period} steps"
    else:
        what = f"{len(r.steps)} of {r.steady_steps} steps"
    return f"{what} +{ms(r.extra_us)}: +{ms(r.per_step_us)} a step on average"


def ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def outlier_line(o: OutlierStep, *, ranks: int = 1) -> str:
    """The outlier step in words: "step 18: 310.1 ms, +287.4 ms over the typical step ($0.02) in host overhead:
    save_checkpoint (record_function range)"; the rank is named when the job has several."""
    where = f" (rank {o.rank})" if ranks > 1 else ""
    cost = f" ({usd(o.extra_usd)})" if o.extra_usd is not None else ""
    return (f"step {printable(o.step)}{where}: {ms(o.time_us)}, +{ms(o.extra_us)} over the typical step{cost} in "
            f"{o.stage.replace('_', ' ')}: {printable(o.cause)}")


_FLAG_WORDS = {"above_peak": "above peak", "above_bandwidth": "above bandwidth", "above_100": "above 100%"}
_CAUSE_WORDS = {"winograd": "Winograd", "fft": "FFT", "sparsity": "2:4 sparsity", "tf32": "ran as TF32",
                "shapes": "shapes do not fit the kernels' time", "cache": "cache", "untimed": "unrecorded kernels",
                "peak": "wrong GPU or shapes"}


def flag_text(flag: CeilingFlag) -> str:
    """A figure physics does not allow, as every view shows it instead of the figure: "above peak (Winograd)"."""
    return f"{_FLAG_WORDS.get(flag.kind, flag.kind)} ({_CAUSE_WORDS.get(flag.cause, flag.cause)})"


def flag_short(flag: CeilingFlag) -> str:
    """The flag in a narrow column ("> peak", "> bw", "> 100%"); the views give its cause beside the table."""
    return {"above_peak": "> peak", "above_bandwidth": "> bw"}.get(flag.kind, "> 100%")


def share_or_flag(share: float | None, flag: CeilingFlag | None, digits: int = 1) -> str:
    """A share of a ceiling as a percentage, or its flag where it is above the ceiling."""
    return flag_text(flag) if flag is not None else pct(share, digits)
