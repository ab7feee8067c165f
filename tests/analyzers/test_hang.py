"""The hung collective from flight-recorder dumps built in code (in the JSON form PyTorch writes): who entered it,
who never did and what each completed are known by construction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpuscope.api.hang import hang
from tests.conftest import SAMPLES


def entry(seq: int, *, op: str = "nccl:all_reduce", state: str = "completed", group: str = "0",
          sizes: list[list[int]] | None = None, dtype: str = "Float", created_ns: int | None = None) -> dict[str, Any]:
    return {"collective_seq_id": seq, "p2p_seq_id": 0, "is_p2p": False, "profiling_name": op, "state": state,
            "retired": state == "completed", "process_group": [group, "default_pg" if group == "0" else "tp"],
            "pg_id": int(group), "input_sizes": sizes or [[1024]], "input_dtypes": [dtype],
            "output_sizes": sizes or [[1024]], "output_dtypes": [dtype],
            "time_created_ns": created_ns if created_ns is not None else 1_000 * seq, "record_id": seq}


def dumps(tmp_path: Path, per_rank: dict[int, list[dict[str, Any]]], *,
          ranks: dict[str, str] | None = None) -> Path:
    folder = tmp_path / "dumps"
    folder.mkdir()
    config = {name: {"name": name, "desc": "", "ranks": members} for name, members in (ranks or {}).items()}
    for rank, entries in per_rank.items():
        doc = {"version": "2.10", "entries": entries, "pg_config": config, "pg_status": {}}
        (folder / f"nccl_trace_rank_{rank}").write_text(json.dumps(doc))
    return folder


def test_a_rank_that_never_joined_is_missing(tmp_path: Path) -> None:
    done = [entry(s) for s in range(1, 5)]
    report = hang(dumps(tmp_path, {0: [*done, entry(5, state="started")], 1: [*done, entry(5, state="scheduled")],
                                   2: done, 3: [*done, entry(5, state="started")]}))
    assert report.hung_collective is not None
    assert (report.hung_collective.process_group, report.hung_collective.seq, report.hung_collective.op) == \
        ("0", 5, "all_reduce")
    assert report.missing_ranks == (2,) and report.waiting_ranks == (0, 1, 3)
    states = {s.rank: (s.entered, s.state, s.last_completed_seq) for s in report.ranks}
    assert states == {0: (True, "started", 4), 1: (True, "scheduled", 4), 2: (False, None, 4), 3: (True, "started", 4)}
    assert report.summary.startswith("Rank 2 never joined all_reduce #5 of process group 0 (default_pg)")


def test_different_sizes_are_the_other_hang(tmp_path: Path) -> None:
    done = [entry(s) for s in range(1, 3)]
    report = hang(dumps(tmp_path, {0: [*done, entry(3, state="started", sizes=[[1024]])],
                                   1: [*done, entry(3, state="started", sizes=[[512]])]}))
    assert report.hung_collective is not None and report.hung_collective.seq == 3
    assert report.missing_ranks == () and report.waiting_ranks == (0, 1)
    (m,) = report.mismatches
    assert (m.seq, m.field, m.values) == (3, "input_sizes", {"[[1024]]": (0,), "[[512]]": (1,)})
    assert "different input sizes" in report.summary


def test_the_first_stuck_group_is_named_and_members_without_a_dump_are_said(tmp_path: Path) -> None:
    """Group 1 (ranks 0, 1, 2) got stuck first; the default group's later collective waits behind it. Rank 2 left
    no dump."""
    world = [entry(1, created_ns=10), entry(2, state="started", created_ns=500)]
    tp_done = [entry(1, group="1", created_ns=20), entry(2, group="1", state="started", created_ns=100)]
    report = hang(dumps(tmp_path, {0: world + tp_done, 1: world + tp_done[:1], 3: world},
                        ranks={"0": "[0, 1, 2, 3]", "1": "[0, 1, 2]"}))
    assert report.hung_collective is not None and report.hung_collective.process_group == "1"
    assert report.missing_ranks == (1,) and report.waiting_ranks == (0,) and report.undumped_ranks == (2,)
    assert "left no dump" in report.summary


def test_every_rank_inside_and_none_done_blames_the_collective(tmp_path: Path) -> None:
    done = [entry(s) for s in range(1, 3)]
    report = hang(dumps(tmp_path, {r: [*done, entry(3, state="started")] for r in range(4)}))
    assert report.missing_ranks == () and report.waiting_ranks == (0, 1, 2, 3)
    assert "the collective itself is stuck" in report.summary


def test_nothing_stuck(tmp_path: Path) -> None:
    report = hang(dumps(tmp_path, {r: [entry(s) for s in range(1, 4)] for r in range(2)}))
    assert report.hung_collective is None and report.missing_ranks == report.waiting_ranks == ()
    assert report.summary.startswith("No collective is stuck")


def p2p(seq: int, kind: str, me: int, peer: int, *, state: str = "completed", group: str = "0") -> dict[str, Any]:
    """A send (``me->peer``) or receive (``me<-peer``) as NCCL names it, numbered ``seq`` among the rank's
    point-to-point ops in the group."""
    arrow = "->" if kind == "send" else "<-"
    return {**entry(0, op=f"nccl:{kind} {me}{arrow}{peer}", state=state, group=group), "is_p2p": True,
            "p2p_seq_id": seq, "collective_seq_id": 0}


def test_a_point_to_point_number_in_pg_status_hides_no_hang(tmp_path: Path) -> None:
    """NCCL counts a group's sends and receives in pg_status' "last completed" too: a point-to-point number there
    (9) would pass for a collective's, past the stuck all_reduce #6. The entries say what completed."""
    folder = tmp_path / "dumps"
    folder.mkdir()
    for source in (SAMPLES / "gloo_4rank" / "hang" / "json").iterdir():
        doc = json.loads(source.read_text())
        doc["pg_status"]["0"]["last_completed_collective"] = "9"
        (folder / source.name).write_text(json.dumps(doc))
    report = hang(folder)
    assert report.hung_collective is not None
    assert (report.hung_collective.seq, report.hung_collective.op) == (6, "all_reduce")
    assert report.missing_ranks == (1,) and report.waiting_ranks == (0, 2, 3)


def test_sends_and_receives_in_the_group_leave_the_collectives_count_alone(tmp_path: Path) -> None:
    """Ranks 0 and 1 exchange sends and receives between their all_reduces; rank 1 never joins all_reduce #6, and
    waits in a receive from rank 0 that rank 0 never posted a send for."""
    done = [entry(s) for s in range(1, 6)]
    pairs0 = [p2p(1, "send", 0, 1), p2p(2, "recv", 0, 1)]
    pairs1 = [p2p(1, "recv", 1, 0), p2p(2, "send", 1, 0), p2p(3, "recv", 1, 0, state="started")]
    report = hang(dumps(tmp_path, {0: [*done, *pairs0, entry(6, state="started")], 1: [*done, *pairs1],
                                   2: [*done, entry(6, state="started")], 3: [*done, entry(6, state="started")]}))
    assert report.hung_collective is not None and report.hung_collective.seq == 6
    assert report.missing_ranks == (1,) and report.waiting_ranks == (0, 2, 3)
    (u,) = report.unmatched_p2p
    assert (u.op, u.rank, u.peer, u.seq, u.state) == ("recv", 1, 0, 3, "started")
    assert "rank 1's recv #3 from rank 0 in process group 0 has no send" in report.summary


def test_a_send_with_no_receive_is_named(tmp_path: Path) -> None:
    """In group 1 (global ranks 2 and 3; the names give the group's own ranks 0 and 1) rank 2 sends twice to rank 3,
    which posted one receive: the second send has none. A pair both posted and still in flight is no mismatch."""
    done = [entry(s) for s in range(1, 4)]
    sent = [p2p(1, "send", 0, 1, state="started", group="1"), p2p(2, "send", 0, 1, state="scheduled", group="1")]
    posted = [p2p(1, "recv", 1, 0, state="started", group="1")]
    report = hang(dumps(tmp_path, {0: done, 1: done, 2: [*done, *sent], 3: [*done, *posted]},
                        ranks={"0": "[0, 1, 2, 3]", "1": "[2, 3]"}))
    assert report.hung_collective is None
    (u,) = report.unmatched_p2p
    assert (u.process_group, u.op, u.rank, u.peer, u.seq) == ("1", "send", 2, 3, 2)
    assert report.summary == ("No collective is stuck, but rank 2's send #2 to rank 3 in process group 1 has no "
                              "receive: rank 3's dump shows none posted.")
