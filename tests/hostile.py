"""A real HTTP server on 127.0.0.1 that misbehaves on purpose, for the fault tests of every HTTP client gpuscope has
(the dcgm-exporter scrape, the Prometheus client): it hangs after accepting, drips one byte a second, sends an
endless or a gzip-bomb body, cuts an answer short, resets the connection, answers 5xx, garbage or malformed points.

Each request is handled by ``server.behave(request)``: a function returning an ``Act`` (set it between requests);
``server.requests`` records what was asked. Acts that wait (hang, drip) end when the server is closed.
``peak_rss_of`` runs a client against it and watches the memory it holds.
"""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import subprocess
import threading
import time
import urllib.parse
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    """Names lowercased."""
    form: dict[str, str] = field(default_factory=dict)
    """A POST's form fields (a Prometheus query's ``query``, ``start``, ...)."""


Act = Callable[[socket.socket, "Hostile"], None]


class Hostile:
    """The server; ``behave`` picks what each request gets (default: 200 with an empty Prometheus matrix)."""

    def __init__(self) -> None:
        self.behave: Callable[[Request], Act] = lambda _request: answer(200, empty_matrix())
        self.requests: list[Request] = []
        self.closed = threading.Event()
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                request = read_request(self.request)
                if request is None:
                    return
                hostile.requests.append(request)
                try:
                    hostile.behave(request)(self.request, hostile)
                except OSError:
                    pass  # the client gave up: what it is meant to do

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.closed.set()
        self.server.shutdown()
        self.server.server_close()


def read_request(sock: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path = lines[0].split(" ")[:2]
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("latin-1")).items()}
    return Request(method=method, path=path, headers=headers, form=form)


# -- acts ----------------------------------------------------------------------------------------------


def answer(status: int, body: bytes, *, headers: dict[str, str] | None = None) -> Act:
    """A whole, well-formed HTTP answer."""
    def act(sock: socket.socket, _server: Hostile) -> None:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        sock.sendall(f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra}\r\n"
                     .encode() + body)
    return act


def hang(sock: socket.socket, server: Hostile) -> None:
    """Accepted and read, never answered."""
    server.closed.wait(120)


def drip(*, headers_too: bool) -> Act:
    """An answer one byte a second, from its first line (``headers_too``) or from its body on."""
    def act(sock: socket.socket, server: Hostile) -> None:
        body = json.dumps(empty_matrix_obj()).encode() * 1000
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        if not headers_too:
            sock.sendall(head)
        for byte in (head if headers_too else b"") + body:
            sock.sendall(bytes([byte]))
            if server.closed.wait(1.0):
                return
    return act


def endless(piece: bytes) -> Act:
    """200 without a length, then ``piece`` again and again until the client hangs up."""
    def act(sock: socket.socket, server: Hostile) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        block = piece * max(1, 65536 // len(piece))
        while not server.closed.is_set():
            sock.sendall(block)
    return act


def gzip_bomb(sock: socket.socket, server: Hostile) -> None:
    """A gzip stream of zeros without end (about 1,000 times smaller than what it inflates to)."""
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n")
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    sock.sendall(b"\x1f\x8b\x08\x00" + struct.pack("<I", 0) + b"\x02\xff")  # a gzip header, then raw deflate
    zeros = bytes(1 << 20)
    while not server.closed.is_set():
        sock.sendall(deflate.compress(zeros) + deflate.flush(zlib.Z_SYNC_FLUSH))


def cut_short(sock: socket.socket, _server: Hostile) -> None:
    """A Content-Length of 10,000, then a hundred bytes of a good answer, then the connection closed."""
    body = matrix([({"gpu": "0", "Hostname": "n1"}, [(float(t), "50") for t in range(60, 6000, 60)])])[:100]
    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + body)


def reset(sock: socket.socket, _server: Hostile) -> None:
    """The connection reset (RST) without a byte of answer."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


# -- bodies --------------------------------------------------------------------------------------------


def empty_matrix_obj() -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "matrix", "result": []}}


def empty_matrix() -> bytes:
    return json.dumps(empty_matrix_obj()).encode()


def matrix(series: list[tuple[dict[str, str], list[tuple[float, str]]]]) -> bytes:
    """A range query's answer: each series' labels and its [time, "value"] points."""
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": labels, "values": [[t, v] for t, v in points]} for labels, points in series]}}).encode()


def closed_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def peak_rss_of(command: list[str], env: dict[str, str], *, ceiling_bytes: int,
                bound_s: float | None = None) -> tuple[int, int, str]:
    """Exit code, the highest RSS seen (every 20 ms) and stderr of a command; killed past ``ceiling_bytes`` of RSS
    or (where given) ``bound_s`` seconds."""
    proc = psutil.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = 0
    deadline = None if bound_s is None else time.monotonic() + bound_s
    while proc.poll() is None and (deadline is None or time.monotonic() < deadline):
        try:
            peak = max(peak, proc.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        if peak > ceiling_bytes:
            proc.kill()
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    _, stderr = proc.communicate()
    return proc.returncode, peak, stderr
