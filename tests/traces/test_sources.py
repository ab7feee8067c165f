"""Naming trace files: local paths and URLs, and a URL as it may be shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.model.redact import bare_url
from gpuscope.traces import SourceFile, is_url
from gpuscope.traces.sources import find_sources


@pytest.mark.parametrize(("target", "url"), [
    ("s3://bucket/job/", True), ("gs://b/x.json.gz", True), ("https://host/r.json", True),
    ("abfs://c@acct.dfs.core.windows.net/p", True), ("traces/rank0.json", False), ("/abs/s3:/x", False),
    ("C:rank.json", False), (Path("s3://not/a/url"), False),
])
def test_a_url_is_a_scheme_and_two_slashes(target: str | Path, url: bool) -> None:
    assert is_url(target) is url


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:secret@host:8443/t/rank0.json?sig=abc&se=2030#frag", "https://host:8443/t/rank0.json"),
    ("s3://bucket/job/rank0.json.gz", "s3://bucket/job/rank0.json.gz"),
    ("az://container/job/?sv=2024&sig=xyz", "az://container/job/"),
])
def test_a_url_is_shown_without_user_password_query_or_fragment(url: str, shown: str) -> None:
    assert bare_url(url) == shown


def test_a_signed_url_names_its_file_without_the_query() -> None:
    assert SourceFile("https://h/t/rank3.pt.trace.json.gz?sig=abc", 1).name == "rank3.pt.trace.json.gz"
    assert SourceFile("traces/rank3.json", 1).name == "rank3.json"


def test_local_sources_carry_their_sizes(tmp_path: Path) -> None:
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / "a.json.gz").write_bytes(b"12345")
    (tmp_path / "notes.txt").write_text("not a trace")
    assert find_sources(tmp_path) == [SourceFile(str(tmp_path / "a.json.gz"), 5),
                                      SourceFile(str(tmp_path / "b.json"), 2)]
