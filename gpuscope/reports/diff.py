"""How a Diff reads: the one-line explanation a gate prints, and the terminal view of ``gpuscope diff``."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from gpuscope.console import SafeConsole
from gpuscope.format import gib, ms, pct, printable_all, share_or_flag, usd
from gpuscope.model.diff import Diff, DiffPart, NameChange
from gpuscope.reports.efficiency_view import gflop

NOISE_WORDS = {True: "beyond noise", False: "within noise", None: "n/a"}


def signed_ms(us: float | None) -> str:
    if us is None:
        return "n/a"
    sign = "+" if us > 0 else "-" if us < 0 else "±"
    return sign + ms(abs(us))


def signed_usd(value: float | None) -> str:
    if value is None:
        return "n/a"
    return ("+" if value > 0 else "-" if value < 0 else "±") + usd(abs(value))


def per_1k_steps(diff: Diff) -> str:
    """The change per 1,000 steps (a single step's cost is a fraction of a cent)."""
    per_step = diff.price.usd_per_step
    return "n/a" if per_step is None else f"{signed_usd(per_step * 1000)} per 1,000 steps"


def ranked_parts(diff: Diff) -> list[DiffPart]:
    """The parts that moved, largest change first."""
    return sorted((p for p in diff.parts if abs(p.change_us) > 0), key=lambda p: -abs(p.change_us))


def caveat_lines(diff: Diff) -> list[str]:
    """What every view of a diff leads with: why the runs may be two jobs, and the ranks it left out (or that no rank
    is in both runs, so nothing was compared)."""
    if diff.missing_ranks and not diff.ranks:
        return [f"caveat: {c}" for c in diff.caveats] + [f"not compared: {n}" for n in diff.notes[:1]]
    ranks = ", ".join(str(r) for r in diff.ranks)
    return ([f"caveat: {c}" for c in diff.caveats]
            + [f"compared on rank(s) {ranks} only, both sides priced on their GPUs: {m}" for m in diff.missing_ranks])


def headline(diff: Diff) -> str:
    """One sentence: how the step changed, what most of it is, and its price a month."""
    if diff.change_us is None:
        return "the step time cannot be compared: " + (diff.notes[0] if diff.notes else "one run has none")
    word = "slower" if diff.change_us > 0 else "faster"
    moved = f"got {ms(abs(diff.change_us))} {word}" if diff.change_us else "did not change"
    text = (f"the step {moved} ({ms(diff.step_time_us.baseline)} -> {ms(diff.step_time_us.candidate)}, "
            f"{NOISE_WORDS[diff.significant]})")
    top = ranked_parts(diff)[:2]
    if top:
        text += ": " + ", ".join(f"{signed_ms(p.change_us)} {p.label}" for p in top)
    if diff.usd_per_month is not None:
        text += f"; {signed_usd(diff.usd_per_month)} a month"
    return text


def top_lines(diff: Diff, *, parts: int = 3, names: int = 2) -> list[str]:
    """The top of the explanation, as plain lines: the headline, the largest parts and kernel changes."""
    lines = [headline(diff)]
    for p in ranked_parts(diff)[:parts]:
        share = "" if p.share_of_change is None else f", {pct(p.share_of_change, 0)} of the change"
        lines.append(f"{p.label}: {signed_ms(p.change_us)} per step{share} ({NOISE_WORDS[p.significant]})")
    for k in diff.kernels[:names]:
        lines.append(f"kernel {_name_line(k)}")
    lines += [f"set-up: {s.label} {s.baseline} -> {s.candidate}" for s in diff.setup_changes]
    if diff.usd_per_month is not None:
        lines.append(f"price: {signed_usd(diff.usd_per_month)} a month ({diff.price.assumption})")
    return lines


def _name_line(k: NameChange) -> str:
    return (f"{_short(k.name)} [{k.match}]: {ms(k.baseline_us)} -> {ms(k.candidate_us)} per step "
            f"({signed_ms(k.change_us)})")


def _short(name: str, width: int = 90) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def render(diff: Diff, console: Console | None = None) -> None:
    console = console or SafeConsole()
    for part in sections(printable_all(diff)):
        console.print(part)


def sections(diff: Diff) -> list[RenderableType]:
    out: list[RenderableType] = [
        Text.assemble(("gpuscope diff", "bold"), f": {diff.candidate.name} against {diff.baseline.name}"),
        *(Text(line, style="bold yellow") for line in caveat_lines(diff)),
        Text(headline(diff)),
    ]
    if diff.parts:
        out.append(_parts(diff))
    for title, rows in (("Kernels", diff.kernels), ("Operators", diff.operators)):
        if rows:
            out.append(_names(title, rows[:8]))
    out += [_facts(diff), _setup(diff), _price(diff)]
    out += [Text(f"note: {n}", style="dim") for n in diff.notes]
    return out


def _parts(diff: Diff) -> RenderableType:
    table = Table(title=f"What the change is made of (the parts add up to {signed_ms(diff.change_us)})",
                  title_justify="left", box=None, header_style="bold", pad_edge=False)
    for col in ("part", "baseline", "candidate", "change", "of change", "noise"):
        table.add_column(col, justify="left" if col in ("part", "noise") else "right")
    for p in diff.parts:
        if not (p.baseline_us or p.candidate_us):
            continue
        share = "n/a" if p.share_of_change is None else pct(p.share_of_change, 0)
        table.add_row(Text(p.label), ms(p.baseline_us), ms(p.candidate_us), signed_ms(p.change_us), share,
                      NOISE_WORDS[p.significant])
    return table


def _names(title: str, rows: tuple[NameChange, ...]) -> RenderableType:
    per = "per step"
    table = Table(title=f"{title} whose time {per} changed most", title_justify="left", box=None,
                  header_style="bold", pad_edge=False)
    for col in ("name", "match", "calls", "baseline", "candidate", "change"):
        table.add_column(col, justify="left" if col in ("name", "match") else "right", no_wrap=True,
                         max_width=56 if col == "name" else None, overflow="ellipsis")
    for k in rows:
        table.add_row(Text(_short(k.name, 70)), k.match, f"{k.baseline_count:.3g} -> {k.candidate_count:.3g}",
                      ms(k.baseline_us), ms(k.candidate_us), signed_ms(k.change_us))
    return table


def _facts(diff: Diff) -> RenderableType:
    b, c = diff.baseline, diff.candidate
    memory = (f"peak memory {gib(b.peak_memory_bytes)} ({pct(b.peak_memory_share)}) -> "
              f"{gib(c.peak_memory_bytes)} ({pct(c.peak_memory_share)})")
    work = ""
    if b.model_flops_per_step is not None or c.model_flops_per_step is not None:
        work = (f"; MFU {share_or_flag(b.mfu, b.mfu_flag)} -> {share_or_flag(c.mfu, c.mfu_flag)} "
                f"(model FLOPs per step {gflop(b.model_flops_per_step)} -> {gflop(c.model_flops_per_step)})")
    return Text(f"GPU busy {pct(b.gpu_busy)} -> {pct(c.gpu_busy)}; {memory}; steady steps {b.steady_steps} vs "
                f"{c.steady_steps}{work}")



def _setup(diff: Diff) -> RenderableType:
    lines: list[RenderableType] = [Text("Set-up", style="bold")]
    for s in diff.setup:
        mark = {True: "changed", False: "same", None: "unknown"}[s.changed]
        lines.append(Text(f"  {s.label}: {s.baseline or 'n/a'} -> {s.candidate or 'n/a'} ({mark})",
                          style="" if s.changed else "dim"))
    return Group(*lines)


def _price(diff: Diff) -> RenderableType:
    p = diff.price
    job = (f"{signed_usd(p.usd_per_job)} per job ({p.job_basis})" if p.usd_per_job is not None
           else "per job n/a (give --job-steps or --job-hours)")
    month = (f"{signed_usd(p.usd_per_month)} per month: {p.assumption}" if p.usd_per_month is not None
             else "per month n/a (no price or no step time; set --usd-per-gpu-hour)")
    return Group(Text("Price of the change", style="bold"), Text(f"  {per_1k_steps(diff)}; {job}"),
                 Text(f"  {month}"))
