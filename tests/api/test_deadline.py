"""The command's one deadline bounds the work that other processes do: local worker processes reading objects whose
reads hang are stopped at the deadline, and so are the tasks on a Dask cluster; a port that accepts and never
answers Dask's handshake, and a scheduler that stops answering while tasks run, each end in one line. The objects
come from a real S3-compatible server on loopback (moto), behind a proxy that passes every request on but the
ranged reads of objects, which it never answers."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import gpuscope
from gpuscope.api import GpuscopeError
from gpuscope.net.deadline import CONNECT_S, Deadline, Timeouts
from tests import hostile as H
from tests.cli.helpers import gpuscope as gpuscope_cli
from tests.cli.helpers import one_clean_error_line
from tests.conftest import SAMPLES
from tests.traces.s3server import BUCKET, S3Server, s3_server

pytest.importorskip("s3fs")
pytest.importorskip("moto")
distributed = pytest.importorskip("distributed")

RANKS = sorted(p for p in (SAMPLES / "dlrm_8rank").iterdir() if p.name.endswith(".json.gz"))
URL = f"s3://{BUCKET}/dlrm_8rank/"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server({f"dlrm_8rank/{f.name}": f.read_bytes() for f in RANKS}, {}, tmp_path_factory.mktemp("s3")) as s:
        yield s


@pytest.fixture(scope="module")
def stuck(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment of a client whose S3 endpoint lists and describes objects but never sends their bytes."""
    proxy = H.Hostile()
    upstream = int(s3.endpoint.rsplit(":", 1)[1])
    proxy.behave = lambda r: H.hang if r.method == "GET" and "range" in r.headers else _forward(r, upstream)
    env = {**s3.env(s3.reader, tmp_path_factory.mktemp("aws")), "AWS_ENDPOINT_URL": proxy.url}
    yield env
    proxy.close()


def _forward(request: H.Request, port: int) -> H.Act:
    """The request passed on as it came (its signature covers its Host), the answer sent back as it came."""
    def act(sock: socket.socket, _server: H.Hostile) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request(request.method, request.path, headers=request.headers)
        answer = conn.getresponse()
        body = answer.read()
        head = "".join(f"{k}: {v}\r\n" for k, v in answer.getheaders()
                       if k.lower() not in ("connection", "transfer-encoding", "content-length"))
        length = answer.getheader("Content-Length") or str(len(body))
        sock.sendall(f"HTTP/1.1 {answer.status} {answer.reason}\r\n{head}Content-Length: {length}\r\n"
                     f"Connection: close\r\n\r\n".encode() + (b"" if request.method == "HEAD" else body))
        conn.close()
    return act


def test_worker_processes_are_stopped_at_the_deadline(stuck: dict[str, str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import s3fs

    for name, value in stuck.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GPUSCOPE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("gpuscope.traces.loader.PARALLEL_MIN_BYTES", 0)  # the workers read, however small
    s3fs.S3FileSystem.clear_instance_cache()
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(GpuscopeError, match=r"^s3://traces/dlrm_8rank/.*within 4 s.*the limit of the whole command"):
        gpuscope.analyze(URL, jobs=2, timeout_s=4)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()
            and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], f"worker processes outlived the deadline: {left}"


def test_tasks_on_a_dask_cluster_end_at_the_deadline(stuck: dict[str, str], tmp_path: Path) -> None:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  host="127.0.0.1", env=stuck) as cluster:
        result = gpuscope_cli("analyze", URL, "--no-save", "--dask", cluster.scheduler_address, "--timeout", "6",
                              home=tmp_path, **stuck)
        with distributed.Client(cluster) as client:
            running = client.processing()
    assert result.returncode == 2, result.stderr
    line = one_clean_error_line(result)
    assert line.startswith("gpuscope: error: s3://traces/dlrm_8rank/") and "within 6 s" in line
    assert not any(running.values()), f"tasks left running on the cluster: {running}"


def test_a_port_that_never_answers_dasks_handshake_is_one_line_within_the_default(tmp_path: Path) -> None:
    silent = H.Hostile()
    silent.behave = lambda r: H.hang
    try:
        result = gpuscope_cli("analyze", str(SAMPLES / "dlrm_8rank"), "--no-save", "--dask",
                              f"tcp://127.0.0.1:{silent.port}", home=tmp_path)
    finally:
        silent.close()
    assert result.returncode == 2
    assert one_clean_error_line(result) == (f"gpuscope: error: the Dask scheduler at tcp://127.0.0.1:{silent.port} "
                                            f"accepted the connection but did not answer its handshake within "
                                            f"{CONNECT_S:g} s")


@pytest.fixture
def own_scheduler(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A scheduler and one worker in processes of their own (so the scheduler can be stopped with SIGSTOP)."""
    file = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", str(file)], **quiet)
    worker = None
    try:
        while not file.exists() or not file.read_text().strip().endswith("}"):
            assert scheduler.poll() is None and time.sleep(0.1) is None
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file", str(file),
                                   "--nthreads", "1", "--no-nanny", "--no-dashboard"], **quiet)
        with distributed.Client(scheduler_file=str(file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            address = client.scheduler.address
        yield address, scheduler
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait(30)


def test_a_scheduler_that_stops_answering_ends_the_command(own_scheduler: tuple[str, subprocess.Popen[bytes]],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuscope.api.cluster import dask_executor
    from gpuscope.traces import load

    address, scheduler = own_scheduler
    monkeypatch.setattr("gpuscope.api.cluster.HEARTBEAT_S", 0.5)
    drip = H.Hostile()
    drip.behave = lambda r: H.drip(headers_too=False)  # the task reads for minutes
    timeouts = Timeouts(deadline=Deadline(120), connect_s=10, read_s=2)
    threading.Timer(3, os.kill, (scheduler.pid, signal.SIGSTOP)).start()
    try:
        with pytest.raises(GpuscopeError, match=f"^the Dask scheduler at {address} stopped answering: no reply to a "
                                                f"heartbeat within 2 s$"), dask_executor(address, timeouts) as pool:
            load(drip.url + "/t.json", executor=pool, timeouts=timeouts)
    finally:
        drip.close()


def test_the_stated_defaults_are_the_ones_used() -> None:
    from gpuscope.api.analysis import remote_timeouts
    from gpuscope.api.cluster import HEARTBEAT_S
    from gpuscope.net.deadline import COMMAND_S, READ_S

    assert (COMMAND_S, CONNECT_S, READ_S, HEARTBEAT_S) == (300.0, 10.0, 30.0, 5.0)  # as README and docs say
    for remote in ("https://h/t.json", "s3://b/job/"):
        limits = remote_timeouts(remote)
        assert limits is not None and limits.deadline.seconds == COMMAND_S
        assert (limits.connect_s, limits.read_s) == (CONNECT_S, READ_S)
    on_dask = remote_timeouts(SAMPLES, dask="tcp://h:8786")
    assert on_dask is not None and on_dask.deadline.seconds == COMMAND_S
    assert remote_timeouts(SAMPLES) is None  # a local path has no deadline unless given one
    given = remote_timeouts(SAMPLES, timeout_s=7)
    assert given is not None and given.deadline.seconds == 7
    shown = subprocess.run([sys.executable, "-m", "gpuscope", "analyze", "--help"], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "400"}).stdout
    assert "(default 300 s when a trace is read by URL or on --dask; none for local files)" in " ".join(shown.split())
