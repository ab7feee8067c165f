"""How the analyze benchmarks measure a child: memory of a whole process tree, exit status, the decode ceiling's
byte count."""

from __future__ import annotations

import gzip
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, load_benchmark

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and wait4() rusage")

measuring = load_benchmark("measuring")
children = load_benchmark("analyze_children")
MB = 1_000_000


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_peak_memory_adds_up_a_parent_and_its_forked_worker() -> None:
    # Parent and worker each fill 150 MB of their own after the fork and hold it together for a while:
    # the tree held about 300 MB although no single process passed about 170 MB. (The largest process's
    # ru_maxrss is not checked here: Linux starts a child's at its parent's peak, and the parent is pytest.)
    m = measuring.measure(_python("""
        import os, time
        pid = os.fork()
        block = b"x" * 150_000_000
        time.sleep(1.5)
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    """))
    assert m.rc == 0 and m.processes == 2
    assert m.tree_sampled_bytes > 280 * MB
    assert m.peak_bytes == max(m.tree_sampled_bytes, m.largest_process_rss_bytes)


def test_a_failing_child_is_reported_with_its_last_error_line() -> None:
    m = measuring.measure(_python("import sys; print('first', file=sys.stderr); sys.exit('no such trace')"))
    assert m.rc == 1 and m.error == "no such trace" and m.result is None


def test_decode_child_counts_uncompressed_json(tmp_path: Path) -> None:
    rank0 = next((SAMPLES / "dlrm_8rank").glob("worker0_*.json.gz"))
    (tmp_path / "rank0.json").write_bytes(gzip.decompress(rank0.read_bytes()))
    out = children.child_decode(tmp_path)
    assert out["json_bytes"] == (tmp_path / "rank0.json").stat().st_size
    m = measuring.measure([sys.executable, str(ROOT / "benchmarks" / "analyze_children.py"), "decode",
                                str(rank0)])
    assert m.rc == 0 and m.result["json_bytes"] == out["json_bytes"]
