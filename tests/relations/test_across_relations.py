"""Relations across ranks that must hold on every multi-rank job we have: transform a real job the way a known
change to it would, and the answer must move exactly so (docs/relations.md, "Across ranks").

- Delaying rank r before one collective a step by k: at each such collective every other rank q waits for r k plus
  however late r already was there relative to q (within the ranks' release stagger), and r is a straggler whose
  wait per step is at least the mean of those waits.
- Shifting one rank's clock by days changes no straggler (the clocks are estimated instead, and say so).
- Dropping one rank's flight-recorder dump names that rank (as one whose dump is missing) and changes nothing else.
- Renaming or reordering the rank files changes nothing.

The jobs: sample_traces/gloo_4rank (balanced, delayed, late_once), cpu_gloo_ddp and dlrm_8rank, and the real hang's
dumps in gloo_4rank/hang. Hypothesis picks the rank, the delay, the collective and the days.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import gpuscope
from gpuscope.api.hang import hang
from gpuscope.model.hang import HangReport
from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.relations import across_transforms as tf

GLOO = SAMPLES / "gloo_4rank"
SHARED_CLOCK = [GLOO / "balanced", GLOO / "delayed", GLOO / "late_once", SAMPLES / "cpu_gloo_ddp"]
"""Jobs of four ranks on one host: their traces share its clock, so raw times compare across ranks."""
JOBS = [*SHARED_CLOCK, SAMPLES / "dlrm_8rank"]
HANG = GLOO / "hang"
FEW = settings(max_examples=3, deadline=None, derandomize=True, phases=[Phase.explicit, Phase.generate],
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
"""Few examples, and no shrinking: each example analyses a whole job (the failing one is printed as drawn)."""


@functools.cache
def _analysed(folder: Path) -> Report:
    return gpuscope.analyze(folder)


def _fresh(tmp: Path) -> Path:
    """A new folder under ``tmp`` for one Hypothesis example (the fixture's folder is shared between them)."""
    n = sum(1 for _ in tmp.iterdir()) if tmp.exists() else 0
    return tmp / f"example{n}"


def _ids(folders: list[Path]) -> list[str]:
    return [f.name for f in folders]


# Delaying a rank before one collective a step.


def _per_step(docs: dict[str, tf.Doc]) -> int:
    """Collectives every rank has in every step both ranks share."""
    names = set.intersection(*({n for n, _, _ in tf.steps(d)} for d in docs.values()))
    return min(len(tf.in_step(d, n)) for d in docs.values() for n in names)


def _arrivals_at(docs: dict[str, tf.Doc], index: int) -> dict[str, dict[int, tuple[float, float, float]]]:
    """Per step (by its number, as the report names it), each rank's raw (start, release, step start) at its
    ``index``-th collective there (µs, the host's clock): release is where what it did before began, the latest
    end of its collectives in profiler steps that ended before it began, or the start of the one before it where
    that one was still running (DDP's buckets overlap)."""
    out: dict[str, dict[int, tuple[float, float, float]]] = {}
    for doc in docs.values():
        every = sorted((e for name, _, _ in tf.steps(doc) for e in tf.in_step(doc, name)), key=lambda e: e["ts"])
        for name, start, _ in tf.steps(doc):
            there = tf.in_step(doc, name)
            if len(there) > index:
                c = there[index]
                earlier = [e for e in every if e["ts"] < c["ts"]]
                ended = [float(e["ts"] + e["dur"]) for e in earlier if e["ts"] + e["dur"] <= c["ts"]]
                release = max([*ended, float(earlier[-1]["ts"])]) if earlier else start
                out.setdefault(_number(name), {})[tf.rank_of(doc)] = (float(c["ts"]), release, start)
    return out


def _number(step: str) -> str:
    return step.removeprefix("ProfilerStep#")


@pytest.mark.parametrize("folder", SHARED_CLOCK, ids=_ids(SHARED_CLOCK))
@FEW
@given(data=st.data())
def test_delaying_a_rank_before_one_collective_a_step_names_it_with_that_wait(
        folder: Path, tmp_path: Path, data: st.DataObject) -> None:
    docs = tf.load_job(folder)
    ranks = sorted(tf.rank_of(d) for d in docs.values())
    rank = data.draw(st.sampled_from(ranks), label="rank")
    index = data.draw(st.integers(0, _per_step(docs) - 1), label="collective")
    before = _arrivals_at(docs, index)
    skew_us = max(max(a for a, _, _ in at.values()) - min(a for a, _, _ in at.values()) for at in before.values())
    k_us = skew_us + data.draw(st.integers(20, 150), label="extra ms") * 1000.0  # r arrives last there
    delayed = {_number(name) for name, _ in tf.delay_before(docs, rank, k_us, index)}
    report = gpuscope.analyze(tf.write_job(docs, _fresh(tmp_path)))
    a = report.arrivals
    assert a is not None
    seen = [c for c in a.collectives if c.step in delayed and c.nth == index + 1]
    assert seen and all(c.last_rank == rank for c in seen)
    expected = []
    for c in seen:
        waits = {w.rank: w.wait_us for w in c.waits}
        assert set(waits) == set(ranks) - {rank}
        at = before[c.step or ""]
        first = c is a.collectives[0]  # the first steady one: what it did before began with its step
        for q, wait_us in waits.items():
            whole_us = k_us + at[rank][0] - at[q][0]
            # Its wait for r is for what r did since it was let go, and r may have been let go later.
            later_us = (at[rank][2] - at[q][2]) if first else (at[rank][1] - at[q][1])
            assert wait_us == pytest.approx(whole_us - max(later_us, 0.0), abs=2.0)
        expected.append(sum(waits.values()) / len(waits))
    named = {s.rank: s for s in report.stragglers}
    assert rank in named
    assert named[rank].wait_caused_us >= sum(expected) / a.steps - 1.0
    assert named[rank].consistent_in == named[rank].consistency_units == a.steps


def test_one_step_delayed_at_one_collective_is_one_occurrence_but_at_all_of_them_a_straggler(
        tmp_path: Path) -> None:
    """dlrm_8rank holds one profiled step: a delay before one of its collectives happens once, which no test can
    tell from chance (the relation above cannot hold there, and is not asked to); a delay before every one of its
    eight collectives names the rank, with each other rank waiting about that long at each."""
    folder = SAMPLES / "dlrm_8rank"
    docs = tf.load_job(folder)
    k_us = 20_000.0
    for index in range(_per_step(docs)):
        tf.delay_before(docs, 3, k_us, index)
    report = gpuscope.analyze(tf.write_job(docs, tmp_path / "all"))
    top = report.stragglers[0]
    assert top.rank == 3 and top.consistency_unit == "collective"
    assert top.consistent_in == top.consistency_units == 8
    base = _analysed(folder).arrivals
    assert base is not None and report.arrivals is not None
    for c in report.arrivals.collectives:
        assert c.last_rank == 3 and c.waiting_ranks == 7
        assert all(abs(w.wait_us - k_us) <= base.skew_max_us for w in c.waits)


# Shifting one rank's clock.


@pytest.mark.parametrize("folder", JOBS, ids=_ids(JOBS))
@FEW
@given(data=st.data())
def test_shifting_one_ranks_clock_by_days_changes_no_straggler(folder: Path, tmp_path: Path,
                                                               data: st.DataObject) -> None:
    docs = tf.load_job(folder)
    rank = data.draw(st.sampled_from(sorted(tf.rank_of(d) for d in docs.values())), label="rank")
    days = data.draw(st.integers(1, 400), label="days")
    tf.shift_clock(docs, rank, days * tf.DAY_US)
    report = gpuscope.analyze(tf.write_job(docs, _fresh(tmp_path)))
    base = _analysed(folder)
    a, b = report.arrivals, base.arrivals
    assert a is not None and b is not None and a.clock == "estimated"
    assert (a.clock_note != "") == (b.clock == "shared")
    assert [s.rank for s in report.stragglers] == [s.rank for s in base.stragglers]
    # One rank's clock estimated where it was shared moves each arrival by at most the spread of the ends.
    for s, t in zip(report.stragglers, base.stragglers):
        assert abs(s.wait_caused_us - t.wait_caused_us) <= 2 * b.end_spread_us + 0.01 * t.wait_caused_us


# Renaming and reordering the rank files.


def _across(report: Report) -> Any:
    return json.loads(json.dumps([dataclasses.asdict(s) for s in report.stragglers] +
                                 [dataclasses.asdict(report.arrivals) if report.arrivals else None]))


@pytest.mark.parametrize("folder", [GLOO / "late_once", SAMPLES / "dlrm_8rank"], ids=["late_once", "dlrm_8rank"])
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(8)), stem=st.sampled_from(["worker", "trace-", "z"]))
def test_renaming_or_reordering_rank_files_changes_nothing(folder: Path, tmp_path: Path, order: list[int],
                                                           stem: str) -> None:
    """The files get other names, in another order of listing; the rank is in each trace."""
    copy = tf.renamed(folder, _fresh(tmp_path), lambda old, i: f"{stem}{order[i]}.pt.trace.json.gz")
    assert _across(gpuscope.analyze(copy)) == _across(_analysed(folder))


# Hang dumps.


def _answer(report: HangReport) -> Any:
    return {**dataclasses.asdict(report), "dumps": None}


@functools.cache
def _hang_base() -> HangReport:
    return hang(HANG / "json")


NAMES: list[Callable[[int], str]] = [lambda r: f"nccl_trace_rank_{r}", lambda r: f"rank_{r}.json",
                                     lambda r: f"dump-{r}", lambda r: f"{'abcd'[r]}_rank_{r}"]


@FEW
@given(name=st.sampled_from(range(len(NAMES))))
def test_renaming_or_reordering_dumps_changes_nothing(tmp_path: Path, name: int) -> None:
    folder = tf.copy_dumps(HANG / "json", _fresh(tmp_path), name=NAMES[name])
    assert _answer(hang(folder)) == _answer(_hang_base())


@FEW
@given(dropped=st.integers(0, 3), config=st.booleans())
def test_dropping_one_ranks_dump_names_that_rank(tmp_path: Path, dropped: int, config: bool) -> None:
    """The rank whose dump is gone is named as one whose dump is missing (whether it joined cannot be told then),
    and the answer stands for the others. Without pg_config the world's ranks are 0 to the highest with a dump, so
    the highest rank's dump missing cannot be told from a smaller world: that case cannot hold, and is left out."""
    assume(config or dropped != 3)

    def strip(doc: tf.Doc) -> None:
        if not config:
            doc.pop("pg_config", None)

    report = hang(tf.copy_dumps(HANG / "json", _fresh(tmp_path), keep=lambda r: r != dropped, change=strip))
    base = _hang_base()
    assert report.hung_collective == base.hung_collective
    assert report.undumped_ranks == (dropped,)
    assert report.missing_ranks == tuple(r for r in base.missing_ranks if r != dropped)
    assert report.waiting_ranks == tuple(r for r in base.waiting_ranks if r != dropped)
    assert f"rank {dropped} left no dump" in report.summary
