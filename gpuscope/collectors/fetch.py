"""One HTTP request bounded as a whole: a deadline for all of it, a cap on the answer's size, and credentials kept
out of every message. What the dcgm-exporter scrape and the Prometheus client share.

urllib's timeout is per socket operation: a server that sends one byte a second, or its headers one by one, keeps
a request alive for ever, and a name lookup has no timeout at all. So the request runs in a daemon thread and the
caller waits for it no later than the deadline; then the request's sockets are shut down (which wakes a read
blocked on them, so the thread ends too) and the caller gets a timeout at once, whatever the thread still does.
A gzip-encoded answer is inflated piece by piece and the cap applies to the inflated bytes, so a small answer that
inflates to gigabytes is stopped at the cap.
"""

from __future__ import annotations

import base64
import functools
import http.client
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

CHUNK_BYTES = 1 << 16
ERROR_BODY_BYTES = 1 << 16
"""What is read of an error answer (its first line becomes part of a message)."""
_POLL_S = 0.05
"""How often a caller waiting for a request looks whether the operation was cancelled."""
_SECRET_NAME = re.compile(r"auth|token|key|secret|pass|sig|cookie|credential|session", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069]")
"""Control characters, and the invisible and direction-changing ones that can make a line read as another."""
_GZIP = 16 + zlib.MAX_WBITS

FetchKind = Literal["timeout", "cancelled", "unreachable", "status", "bad_answer", "too_large", "bad_url"]


class Deadline:
    """A moment by which a whole operation must end, shared by all its requests (and their retries).

    ``cancel()`` ends the requests in flight at once and makes later ones fail: one part of an operation failed,
    so the others need not finish.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds
        self._cancelled = threading.Event()

    def left_s(self) -> float:
        return self._end - time.monotonic()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

    def wait(self, seconds: float) -> bool:
        """Sleep ``seconds`` unless the operation is cancelled first; False (at once) when the sleep would end past
        the deadline or was cut short."""
        if seconds >= self.left_s():
            return False
        return not self._cancelled.wait(seconds)


@dataclass(frozen=True)
class Endpoint:
    """A URL split into what is asked, what may be shown, and the credentials it carried."""

    url: str
    """The URL without user and password."""
    shown: str
    """For messages and the store: no user or password, and secret-looking query values replaced by ***."""
    authorization: str | None = None
    """``Basic ...`` from ``user:password@`` in the URL, or None."""


def endpoint(url: str) -> Endpoint:
    """Split ``user:password@`` off a URL (percent-escapes decoded, as browsers and curl do)."""
    try:
        parts = urllib.parse.urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:
        return Endpoint(url=url, shown=redact_url(url))
    if username is None:
        return Endpoint(url=url, shown=redact_url(url))
    secret = f"{urllib.parse.unquote(username)}:{urllib.parse.unquote(password or '')}"
    bare = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return Endpoint(url=bare, shown=redact_url(bare),
                    authorization="Basic " + base64.b64encode(secret.encode()).decode())


def redact_url(url: str) -> str:
    """``url`` as it may be printed or stored: ``user:password@`` becomes ``***@``, and the values of query
    parameters whose names look secret (token, key, auth, password, signature, ...) become ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "***" if "@" in url else url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_NAME.search(name) for name, _ in pairs):
            query = urllib.parse.urlencode([(n, "***" if _SECRET_NAME.search(n) else v) for n, v in pairs],
                                           safe="*")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def secret_header(name: str) -> bool:
    """Whether a header's value is a credential (Authorization, Cookie, X-Api-Key, ...)."""
    return bool(_SECRET_NAME.search(name))


def printable(text: str, limit: int = 300) -> str:
    """Text from a server, made safe for one line of a terminal: control, invisible and direction-changing
    characters become spaces; at most ``limit`` characters."""
    return _CONTROL.sub(" ", text).strip()[:limit]


class FetchError(Exception):
    """A request gave no usable answer; ``str()`` is a few words about why."""

    def __init__(self, kind: FetchKind, reason: str, *, status: int | None = None, body: bytes = b"",
                 retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.kind: FetchKind = kind
        self.status = status
        """The HTTP status of a ``status`` failure."""
        self.body = body
        """The first ``ERROR_BODY_BYTES`` (inflated) of an error answer."""
        self.retry_after_s = retry_after_s
        """The server's Retry-After, in seconds, where it gave one."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def fetch(request: urllib.request.Request, *, deadline: Deadline, max_bytes: int, proxies: bool = True) -> Answer:
    """The status and (inflated) body of one request, ended by ``deadline`` whatever the server does; raises
    ``FetchError``. ``proxies``: honour the environment's http(s)_proxy and no_proxy."""
    if deadline.cancelled:
        raise FetchError("cancelled", "cancelled")
    if deadline.left_s() <= 0:
        raise FetchError("timeout", f"no answer within {deadline.seconds:g} s")
    call = _Call(request, deadline, max_bytes, proxies)
    worker = threading.Thread(target=call.run, name="gpuscope-fetch", daemon=True)
    worker.start()
    while not call.finished.wait(max(0.0, min(_POLL_S, deadline.left_s()))):
        if deadline.cancelled or deadline.left_s() <= 0:
            call.abort()
            if deadline.cancelled:
                raise FetchError("cancelled", "cancelled")
            raise FetchError("timeout", f"no answer within {deadline.seconds:g} s")
    return call.outcome()


class _Call:
    """One request in its thread: the sockets it opened (so that they can be shut down) and its outcome."""

    def __init__(self, request: urllib.request.Request, deadline: Deadline, max_bytes: int, proxies: bool) -> None:
        self.request, self.deadline, self.max_bytes, self.proxies = request, deadline, max_bytes, proxies
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._aborted = False
        self._answer: Answer | None = None
        self._error: FetchError | None = None

    def opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            aborted = self._aborted
        if aborted:
            _shut(sock)

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def outcome(self) -> Answer:
        if self._error is not None:
            raise self._error
        assert self._answer is not None
        return self._answer

    def run(self) -> None:
        try:
            self._answer = self._exchange()
        except FetchError as exc:
            self._error = exc
        except TimeoutError:
            self._error = FetchError("timeout", f"no answer within {self.deadline.seconds:g} s")
        except urllib.error.URLError as exc:
            self._error = _url_error(exc, self.deadline)
        except (http.client.HTTPException, OSError, EOFError, zlib.error) as exc:
            self._error = FetchError("bad_answer", f"bad HTTP answer ({_reason(exc)})")
        except ValueError as exc:
            self._error = FetchError("bad_url", f"not a valid URL ({printable(str(exc))})")
        except Exception as exc:  # noqa: BLE001 - whatever urllib raises on a hostile answer is that answer's fault
            self._error = FetchError("bad_answer", f"bad HTTP answer ({type(exc).__name__})")
        finally:
            self.finished.set()

    def _exchange(self) -> Answer:
        handlers: list[urllib.request.BaseHandler] = [_Plain(self), _Tls(self)]
        if not self.proxies:
            handlers.append(urllib.request.ProxyHandler({}))
        opener = urllib.request.build_opener(*handlers)
        try:
            response = opener.open(self.request, timeout=max(0.001, self.deadline.left_s()))
        except urllib.error.HTTPError as exc:
            raise self._status_error(exc) from None
        with response:
            return Answer(status=response.status, body=_read(response, self.max_bytes))

    def _status_error(self, exc: urllib.error.HTTPError) -> FetchError:
        try:
            body = _read(exc, ERROR_BODY_BYTES, truncate=True)
        except (http.client.HTTPException, OSError, EOFError, zlib.error, FetchError):
            body = b""
        finally:
            exc.close()
        retry = exc.headers.get("Retry-After") if exc.headers is not None else None
        retry_s = float(retry) if retry and retry.strip().isdigit() else None
        return FetchError("status", f"HTTP {exc.code} {printable(str(exc.reason))}", status=exc.code, body=body,
                          retry_after_s=retry_s)


def _read(response: Any, max_bytes: int, *, truncate: bool = False) -> bytes:
    """The body, inflated when gzip-encoded; FetchError("too_large") past ``max_bytes`` (or, with ``truncate``,
    the first ``max_bytes``), FetchError("bad_answer") when it ends before its declared length."""
    length = response.headers.get("Content-Length", "")
    declared = int(length) if length.isdigit() else None
    gzipped = response.headers.get("Content-Encoding", "").strip().lower() == "gzip"
    if not truncate and not gzipped and declared is not None and declared > max_bytes:
        raise FetchError("too_large", f"answer larger than {_size(max_bytes)}")
    out = bytearray()
    inflate = _Inflate() if gzipped else None
    received = 0
    while len(out) <= max_bytes:
        chunk: bytes = response.read(CHUNK_BYTES)
        received += len(chunk)
        if not chunk:
            if declared is not None and received < declared:
                # http.client hands over what came when the server closes early, without a word
                raise FetchError("bad_answer", f"bad HTTP answer (cut short: {received} of {declared} bytes)")
            if inflate is not None:
                inflate.finish()
            return bytes(out)
        out += inflate.more(chunk, max_bytes + 1 - len(out)) if inflate is not None else chunk
    if truncate:
        return bytes(out[:max_bytes])
    raise FetchError("too_large", f"answer larger than {_size(max_bytes)}")


class _Inflate:
    """A gzip stream inflated piece by piece, never more at a time than asked for (one or more gzip members)."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(_GZIP)

    def more(self, chunk: bytes, most: int) -> bytes:
        out = bytearray()
        data = chunk
        while len(out) < most:
            if self._z.eof and self._z.unused_data:  # a second gzip member follows
                data, self._z = self._z.unused_data + data, zlib.decompressobj(_GZIP)
            if not data:
                break
            out += self._z.decompress(data, most - len(out))
            data = self._z.unconsumed_tail
        return bytes(out)

    def finish(self) -> None:
        if not self._z.eof:
            raise FetchError("bad_answer", "bad HTTP answer (gzip stream cut short)")


def _size(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MiB" if n_bytes >= 2**20 else f"{n_bytes} bytes"


def _url_error(exc: urllib.error.URLError, deadline: Deadline) -> FetchError:
    if isinstance(exc.reason, TimeoutError):
        return FetchError("timeout", f"no answer within {deadline.seconds:g} s")
    return FetchError("unreachable", f"unreachable ({_reason(exc.reason)})")


def _reason(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return printable(reason.strerror)
    return printable(str(reason)) or type(reason).__name__


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed, or not connected yet: its own timeout ends it


class _Plain(urllib.request.HTTPHandler):
    """Plain HTTP through connections whose sockets the call can shut down."""

    def __init__(self, call: _Call) -> None:
        super().__init__()
        self._call = call

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req)

    def _connection(self, host: str, **kwargs: Any) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection(host, **kwargs)
        _watch(conn, self._call)
        return conn


class _Tls(urllib.request.HTTPSHandler):
    """HTTPS, the same way, with the system's certificates."""

    def __init__(self, call: _Call) -> None:
        super().__init__()
        self._call = call

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(self._connection, req, context=_tls_context())

    def _connection(self, host: str, **kwargs: Any) -> http.client.HTTPConnection:
        conn = http.client.HTTPSConnection(host, **kwargs)
        _watch(conn, self._call)
        return conn


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Made once: loading the system's certificates takes milliseconds, and the DCGM scrape asks twice a second."""
    return ssl.create_default_context()


def _watch(conn: http.client.HTTPConnection, call: _Call) -> None:
    """Hand every socket the connection opens (and, for TLS, its wrapped one) to the call."""
    create = conn._create_connection  # type: ignore[attr-defined]
    connect = conn.connect

    def create_and_note(*args: Any, **kwargs: Any) -> socket.socket:
        sock: socket.socket = create(*args, **kwargs)
        call.opened(sock)
        return sock

    def connect_and_note() -> None:
        connect()
        if conn.sock is not None:
            call.opened(conn.sock)

    conn._create_connection = create_and_note  # type: ignore[attr-defined]
    conn.connect = connect_and_note  # type: ignore[method-assign]


def request(url: str, *, data: bytes | None = None, headers: Mapping[str, str] | None = None,
            authorization: str | None = None) -> urllib.request.Request:
    """A GET (a POST with ``data``) whose credentials (``authorization`` and secret-looking headers) are not passed
    on when a redirect leads elsewhere; FetchError("bad_url") for a URL urllib cannot ask."""
    try:
        req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    except ValueError as exc:
        raise FetchError("bad_url", f"not a valid URL ({printable(str(exc))})") from None
    for name, value in (headers or {}).items():
        if secret_header(name):
            req.add_unredirected_header(name, value)
        else:
            req.add_header(name, value)
    if authorization is not None:
        req.add_unredirected_header("Authorization", authorization)
    return req
