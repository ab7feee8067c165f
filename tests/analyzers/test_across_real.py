"""Stragglers on real multi-rank traces: a 4-rank torch.distributed job over gloo recorded with one rank delayed and
without (sample_traces/gloo_4rank, made by its record.py), and the 8 NCCL ranks of dlrm_8rank. What the job did is
known by construction; what the raw events say is read here from the JSON, with nothing of gpuscope's reader."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path
from types import ModuleType

import gpuscope
from tests.conftest import SAMPLES
from tests.reference import events

GLOO = SAMPLES / "gloo_4rank"


def _record() -> ModuleType:
    """The recording script, for the job's constants (which rank is delayed, by how much, how many steps)."""
    spec = importlib.util.spec_from_file_location("gloo_record", GLOO / "record.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORD = _record()


def _gloo_arrivals(folder: Path) -> dict[int, list[float]]:
    """Each rank's gloo all_reduce starts (µs) inside its profiler steps, in order; the rank from the file name."""
    return {rank: [start for start, _ in spans] for rank, spans in _gloo_spans(folder).items()}


def _gloo_spans(folder: Path) -> dict[int, list[tuple[float, float]]]:
    """Each rank's gloo all_reduces (start, end in µs) inside its profiler steps, in order."""
    out = {}
    for path in sorted(folder.glob("rank*.json.gz")):
        evs = events(path)
        steps = [(e["ts"], e["ts"] + e["dur"]) for e in evs if e["name"].startswith("ProfilerStep#")]
        out[int(path.name[4])] = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs if e["name"] == "gloo:all_reduce"
                                        and any(a <= e["ts"] < b for a, b in steps))
    return out


def test_the_delayed_rank_is_the_straggler_and_the_others_wait_for_it() -> None:
    report = gpuscope.analyze(GLOO / "delayed")
    top = report.stragglers[0]
    assert top.rank == RECORD.DELAYED_RANK and len(report.stragglers) == 1
    # It sleeps DELAY_S before every all_reduce: the others wait for it at least half of that, each step.
    assert top.wait_caused_us >= 0.5 * RECORD.DELAY_S * 1e6
    # And never more than their whole wait, which the raw starts give: the delayed rank's start less theirs.
    arrivals = _gloo_arrivals(GLOO / "delayed")
    assert [len(a) for a in arrivals.values()] == [RECORD.ACTIVE] * RECORD.WORLD
    late = arrivals[RECORD.DELAYED_RANK]
    whole = statistics.fmean(statistics.fmean(late[i] - a[i] for r, a in arrivals.items() if r != top.rank)
                             for i in range(RECORD.ACTIVE))
    assert top.wait_caused_us <= whole
    assert top.last_in == top.collectives == RECORD.ACTIVE
    assert top.cause_part == "other"  # time.sleep runs outside any profiled op
    assert report.verdict.summary.startswith(f"Rank {RECORD.DELAYED_RANK} holds the job back")
    assert report.arrivals is not None and report.arrivals.where == "host" and report.arrivals.clock == "shared"


def test_a_rank_late_before_one_all_reduce_in_four_is_the_straggler() -> None:
    """late_once: rank 1 sleeps 300 ms before the first of four all_reduces a step. It is last at few more than a
    quarter of them, and the others wait for it most of their step: the straggler, by the wait it causes."""
    folder = GLOO / "late_once"
    report = gpuscope.analyze(folder)
    top = report.stragglers[0]
    assert top.rank == RECORD.ONCE_RANK and top.wait_caused_us >= 0.5 * RECORD.ONCE_DELAY_S * 1e6
    assert top.consistent_in == top.consistency_units and top.consistency_unit == "step"
    assert top.late_share < 0.5 and top.cause_part == "other"
    # Against the raw events: at the first all_reduce of each step the others wait from their start to rank 1's,
    # at most their time in it; the wait rank 1 causes is never more than that, nor much less.
    spans = _gloo_spans(folder)
    n = len(spans[top.rank])
    assert n % RECORD.ONCE_COLLECTIVES == 0 and all(len(v) == n for v in spans.values())
    firsts = range(0, n, RECORD.ONCE_COLLECTIVES)
    raw = [statistics.fmean(min(spans[top.rank][i][0] - s[i][0], s[i][1] - s[i][0])
                            for r, s in spans.items() if r != top.rank) for i in firsts]
    steps = report.arrivals.steps if report.arrivals is not None else 0
    assert steps and 0.9 * sum(raw[-steps:]) / steps <= top.wait_caused_us <= max(raw) + 1.0
    a = report.arrivals
    assert a is not None and a.worst and a.worst[0].last_rank == top.rank and a.worst[0].nth == 1
    assert {w.rank for w in a.worst[0].waits} == set(spans) - {top.rank}
    assert report.verdict.summary.startswith(f"Rank {RECORD.ONCE_RANK} holds the job back")


def test_the_same_job_without_a_delay_has_no_straggler() -> None:
    report = gpuscope.analyze(GLOO / "balanced")
    assert report.stragglers == ()
    assert report.arrivals is not None and report.arrivals.matched == RECORD.ACTIVE


def test_dlrm_rank_7_reaches_most_collectives_last() -> None:
    """The DLRM job's ranks arrive spread out (their steps start up to 7 ms apart): rank 7 reaches 5 of the 8
    collectives last, and the wait it causes by its own longer lead-in is a part of the others' whole wait."""
    folder = SAMPLES / "dlrm_8rank"
    starts: dict[int, list[tuple[float, float]]] = {}
    for path in sorted(folder.glob("*.json.gz")):
        evs = events(path)
        starts[int(path.name[6])] = sorted((e["ts"], e["ts"] + e["dur"]) for e in evs
                                           if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    n = len(starts[0])
    last = [max(starts, key=lambda r: starts[r][i][0]) for i in range(n)]
    report = gpuscope.analyze(folder)
    top = report.stragglers[0]
    assert top.rank == 7 == statistics.mode(last)
    assert (top.last_in, top.collectives) == (last.count(7), n) == (5, 8)
    whole = sum(starts[7][i][0] - starts[r][i][0] for i in range(n) if last[i] == 7 for r in starts if r != 7) / 7
    assert 0 < top.wait_caused_us < whole
