"""Traces read by URL from a real S3-compatible server on loopback (moto's server mode, IAM enforced): the same
report as the local folder, objects read by the workers and not by the process that starts the analysis, and one
line, never a credential, for a missing bucket, a denied read and a half-uploaded object."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES
from tests.traces.s3server import BUCKET, S3Server, s3_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")

DLRM = SAMPLES / "dlrm_8rank"
RANKS = sorted(p for p in DLRM.iterdir() if p.name.endswith(".json.gz"))
HALF = RANKS[1].name
"""In ``half/``: this rank's object holds the first half of its bytes, as an upload cut short leaves it."""
PENDING = RANKS[2].name
"""In ``pending/``: a multipart upload of this rank started and never completed (no object, one part)."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    objects = {f"dlrm_8rank/{f.name}": f.read_bytes() for f in RANKS}
    objects[f"half/{RANKS[0].name}"] = RANKS[0].read_bytes()
    objects[f"half/{HALF}"] = RANKS[1].read_bytes()[: RANKS[1].stat().st_size // 2]
    with s3_server(objects, {f"pending/{PENDING}": RANKS[2].read_bytes()}, tmp_path_factory.mktemp("s3")) as s:
        yield s


def _normal(doc: dict[str, Any]) -> dict[str, Any]:
    """A report without what names where it was read from: the run id, and each rank's source (a file's name)."""
    ranks = [{**r, "source": Path(r["source"]).name} for r in doc["ranks"]]
    return {**doc, "run": {k: v for k, v in doc["run"].items() if k != "id"}, "ranks": ranks}


def _no_credentials(server: S3Server, *texts: str) -> None:
    for keys in (server.reader, server.lister):
        for text in texts:
            assert keys.secret_access_key not in text and keys.access_key_id not in text


def test_a_folder_of_ranks_by_url_gives_the_report_of_the_local_folder(server: S3Server, tmp_path: Path) -> None:
    env = server.env(server.reader, tmp_path)
    local = gpuscope("analyze", str(DLRM), "--json", "--no-save", home=tmp_path)
    remote = gpuscope("analyze", f"s3://{BUCKET}/dlrm_8rank/", "--json", "--no-save", home=tmp_path, **env)
    assert local.returncode == 0 and remote.returncode == 0, remote.stderr
    report = json.loads(remote.stdout)
    assert [r["source"] for r in report["ranks"]] == [f"s3://{BUCKET}/dlrm_8rank/{f.name}" for f in RANKS]
    assert report["run"]["name"] == "dlrm_8rank"
    assert _normal(report) == _normal(json.loads(local.stdout))
    _no_credentials(server, remote.stdout, remote.stderr)


def test_on_dask_the_workers_read_the_objects_and_give_the_same_report(server: S3Server, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    env = server.env(server.reader, tmp_path)
    local = gpuscope("analyze", str(DLRM), "--json", "--no-save", home=tmp_path)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1", env=env) as cluster, \
            distributed.Client(cluster) as client, distributed.get_task_stream(client=client) as stream:
        remote = gpuscope("analyze", f"s3://{BUCKET}/dlrm_8rank", "--json", "--no-save", "--dask",
                          cluster.scheduler_address, home=tmp_path, **env)
    assert remote.returncode == 0, remote.stderr
    assert _normal(json.loads(remote.stdout)) == _normal(json.loads(local.stdout))
    assert len([t for t in stream.data if "read_one" in str(t["key"])]) == len(RANKS)


def test_the_process_that_starts_the_analysis_reads_no_object(server: S3Server, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    import gpuscope as api
    from gpuscope.traces import remote

    for name, value in server.env(server.reader, tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    s3fs.S3FileSystem.clear_instance_cache()
    parent, read = os.getpid(), remote.read_file

    def read_in_workers_only(url: str, **options: Any) -> Any:
        assert os.getpid() != parent, f"the parent read {url}"
        return read(url, **options)

    monkeypatch.setattr(remote, "read_file", read_in_workers_only)
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)
    report = api.analyze(f"s3://{BUCKET}/dlrm_8rank", jobs=2)
    assert [r.rank for r in report.ranks] == list(range(8))


@pytest.mark.parametrize(("url", "keys", "problem"), [
    ("s3://no-such-bucket/dlrm_8rank/", "reader", "no such bucket"),
    (f"s3://{BUCKET}/dlrm_8rank/{RANKS[0].name}", "lister", "permission denied"),
    (f"s3://{BUCKET}/half/{HALF}", "reader", "the gzip stream is corrupt or truncated"),
    (f"s3://{BUCKET}/pending/{PENDING}", "reader", "no such file or folder"),
    (f"s3://{BUCKET}/pending/", "reader", "no such file or folder"),
], ids=["missing_bucket", "denied_read", "half_uploaded_object", "uncompleted_upload", "folder_of_no_objects"])
def test_what_cannot_be_read_is_one_line_without_credentials(server: S3Server, tmp_path: Path, url: str,
                                                             keys: str, problem: str) -> None:
    env = server.env(server.reader if keys == "reader" else server.lister, tmp_path)
    result = gpuscope("analyze", url, "--no-save", home=tmp_path, **env)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert line.startswith(f"gpuscope: error: {url.rstrip('/')}") and problem in line, line
    _no_credentials(server, result.stdout, result.stderr)


def test_a_folder_that_may_be_listed_but_not_read_names_each_rank_it_could_not_read(server: S3Server,
                                                                                   tmp_path: Path) -> None:
    url = f"s3://{BUCKET}/dlrm_8rank/"
    result = gpuscope("analyze", url, "--no-save", home=tmp_path, **server.env(server.lister, tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    *skipped, last = [line for line in result.stderr.splitlines() if line.strip()]
    assert skipped == [f"gpuscope: warning: skipped s3://{BUCKET}/dlrm_8rank/{f.name}: permission denied: the "
                       "credentials in use may not read it" for f in RANKS]
    assert last == f"gpuscope: error: {url}: none of the {len(RANKS)} trace files could be read"
    _no_credentials(server, result.stdout, result.stderr)


def test_a_half_uploaded_rank_in_a_folder_is_skipped_and_named(server: S3Server, tmp_path: Path) -> None:
    result = gpuscope("analyze", f"s3://{BUCKET}/half/", "--json", "--no-save", home=tmp_path,
                      **server.env(server.reader, tmp_path))
    assert result.returncode == 0, result.stderr
    assert [r["source"] for r in json.loads(result.stdout)["ranks"]] == [f"s3://{BUCKET}/half/{RANKS[0].name}"]
    (warning,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert warning.startswith(f"gpuscope: warning: skipped s3://{BUCKET}/half/{HALF}: ") and "truncated" in warning


def test_a_password_in_a_url_is_never_shown(server: S3Server, tmp_path: Path) -> None:
    host = server.endpoint.removeprefix("http://")
    result = gpuscope("analyze", f"http://someone:pa55word-in-url@{host}/{BUCKET}/none.json", "--no-save",
                      home=tmp_path)
    assert result.returncode == 2
    line = one_clean_error_line(result)
    assert f"http://{host}/{BUCKET}/none.json" in line and "pa55word" not in result.stderr + result.stdout


def test_keys_in_an_s3_url_are_used_and_never_shown(server: S3Server, tmp_path: Path) -> None:
    keys = server.reader
    env = {k: v for k, v in server.env(keys, tmp_path).items() if k not in ("AWS_ACCESS_KEY_ID",
                                                                            "AWS_SECRET_ACCESS_KEY")}
    url = f"s3://{quote(keys.access_key_id, safe='')}:{quote(keys.secret_access_key, safe='')}@{BUCKET}/dlrm_8rank/"
    result = gpuscope("analyze", url, "--json", home=tmp_path, **env)
    assert result.returncode == 0, result.stderr
    assert [r["source"] for r in json.loads(result.stdout)["ranks"]] == [f"s3://{BUCKET}/dlrm_8rank/{f.name}"
                                                                        for f in RANKS]
    _no_credentials(server, result.stdout, result.stderr)
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):
        assert keys.secret_access_key.encode() not in path.read_bytes(), path
    denied = gpuscope("analyze", url.replace(quote(keys.secret_access_key, safe=""), "wrong-secret"), home=tmp_path,
                      **env)
    assert denied.returncode == 2 and "wrong-secret" not in denied.stderr
    assert one_clean_error_line(denied).startswith(f"gpuscope: error: s3://{BUCKET}/dlrm_8rank")
