"""One HTTP request bounded as a whole: a deadline for all of it, limits for each of its steps, a cap on the
answer's size, and credentials kept out of every message. What the dcgm-exporter scrape, the Prometheus client and
trace files read by http(s) URL share.

urllib's timeout is per socket operation: a server that sends one byte a second, or its headers one by one, keeps
a request alive for ever, and a name lookup has no timeout at all. So the request runs in a daemon thread and the
caller waits for it no later than the deadline; then the request's sockets are shut down (which wakes a read
blocked on them, so the thread ends too) and the caller gets a timeout at once, whatever the thread still does.
With ``Timeouts``, each step has its own limit too: the TCP connection and the TLS handshake ``connect_s``, the
first byte of the answer and any later pause ``read_s``; a timeout names the step that did not finish.
"""

from __future__ import annotations

import base64
import functools
import http.client
import re
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpuscope.model.redact import redact_url, secret_name
from gpuscope.net.body import BodyError, read_body
from gpuscope.net.deadline import Deadline, Timeouts

__all__ = ["Answer", "Deadline", "Endpoint", "FetchError", "FetchKind", "Phase", "download", "endpoint", "fetch",
           "printable", "request", "secret_header"]

ERROR_BODY_BYTES = 1 << 16
"""What is read of an error answer (its first line becomes part of a message)."""
_POLL_S = 0.05
"""How often a caller waiting for a request looks whether the operation was cancelled."""
_NOT_PLAIN_ASCII = re.compile("[^ -~]")
"""The characters a server's text is checked one by one for: all but printable ASCII."""

FetchKind = Literal["timeout", "cancelled", "unreachable", "tls", "redirects", "status", "bad_answer", "too_large",
                    "bad_url"]
Phase = Literal["connect", "tls", "answer", "read"]
_WAITING_FOR: dict[Phase, str] = {"connect": "the connection", "tls": "the TLS handshake",
                                  "answer": "the answer's status and headers", "read": "the rest of the answer"}


def secret_header(name: str) -> bool:
    """Whether a header's value is a credential (Authorization, Cookie, X-Api-Key, ...)."""
    return secret_name(name)


def printable(text: str, limit: int = 300) -> str:
    """Text from a server, made safe for one line of a terminal: every character Python does not call printable
    (controls, line breaks, the invisible and direction-changing ones, a soft hyphen) becomes a space; at most
    ``limit`` characters."""
    if not text.isprintable():
        text = _NOT_PLAIN_ASCII.sub(lambda m: m.group() if m.group().isprintable() else " ", text)
    return text.strip()[:limit]


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


class FetchError(Exception):
    """A request gave no usable answer; ``str()`` is a few words about why."""

    def __init__(self, kind: FetchKind, reason: str, *, status: int | None = None, body: bytes = b"",
                 retry_after_s: float | None = None, phase: Phase | None = None, whole: bool = False) -> None:
        super().__init__(reason)
        self.kind: FetchKind = kind
        self.status = status
        """The HTTP status of a ``status`` failure."""
        self.body = body
        """The first ``ERROR_BODY_BYTES`` (inflated) of an error answer."""
        self.retry_after_s = retry_after_s
        """The server's Retry-After, in seconds, where it gave one."""
        self.phase = phase
        """The step a ``timeout`` stopped: connecting, the TLS handshake, waiting for the answer, reading it."""
        self.whole = whole
        """A ``timeout`` of the whole operation's deadline (rather than of one step's own limit)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


def fetch(request: urllib.request.Request, *, deadline: Deadline, max_bytes: int, proxies: bool = True) -> Answer:
    """The status and (inflated) body of one request, ended by ``deadline`` whatever the server does; raises
    ``FetchError``. ``proxies``: honour the environment's http(s)_proxy and no_proxy."""
    call = _Call(request, Timeouts(deadline=deadline, connect_s=float("inf"), read_s=float("inf")), max_bytes,
                 proxies)
    status, body = call.wait()
    return Answer(status=status, body=bytes(body))


def download(request: urllib.request.Request, *, timeouts: Timeouts, max_bytes: int) -> bytearray:
    """The (inflated) body of a successful GET, in a buffer of its own, each step within its limit and the whole
    by the deadline; raises ``FetchError`` (``too_large`` past ``max_bytes``)."""
    return _Call(request, timeouts, max_bytes, proxies=True).wait()[1]


class _Call:
    """One request in its thread: the sockets it opened (so that they can be shut down), the step it is at, and
    its outcome."""

    def __init__(self, request: urllib.request.Request, timeouts: Timeouts, max_bytes: int, proxies: bool) -> None:
        self.request, self.timeouts, self.max_bytes, self.proxies = request, timeouts, max_bytes, proxies
        self.finished = threading.Event()
        self.phase: Phase = "connect"
        self.received = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._aborted = False
        self._outcome: tuple[int, bytearray] | None = None
        self._error: FetchError | None = None

    def wait(self) -> tuple[int, bytearray]:
        deadline = self.timeouts.deadline
        if deadline.cancelled:
            raise FetchError("cancelled", "cancelled")
        if deadline.left_s() <= 0:
            raise self._timeout(whole=True)
        threading.Thread(target=self.run, name="gpuscope-fetch", daemon=True).start()
        while not self.finished.wait(max(0.0, min(_POLL_S, deadline.left_s()))):
            if deadline.cancelled or deadline.left_s() <= 0:
                self.abort()
                if deadline.cancelled:
                    raise FetchError("cancelled", "cancelled")
                raise self._timeout(whole=True)
        if self._error is not None:
            raise self._error
        assert self._outcome is not None
        return self._outcome

    def _timeout(self, *, whole: bool) -> FetchError:
        """A timeout at the step the request is at: of the whole deadline, or of that step's own limit."""
        phase = self.phase
        limit_s = self.timeouts.connect_s if phase in ("connect", "tls") else self.timeouts.read_s
        if whole or limit_s == float("inf") or self.timeouts.deadline.left_s() < 0.05:
            reason = f"no answer within {self.timeouts.deadline.seconds:g} s"
            if limit_s != float("inf"):  # a request with steps of its own says which one it was at
                got = f" after {self.received} bytes of it" if phase == "read" else ""
                reason += f" (still waiting for {_WAITING_FOR[phase]}{got})"
            return FetchError("timeout", reason, phase=phase, whole=True)
        if phase == "connect":
            reason = f"no connection within {self.timeouts.connect_s:g} s"
        elif phase == "tls":
            reason = f"the TLS handshake did not finish within {self.timeouts.connect_s:g} s"
        elif phase == "answer":
            reason = f"connected, but no answer came within {self.timeouts.read_s:g} s"
        else:
            reason = f"the answer stalled: nothing for {self.timeouts.read_s:g} s after {self.received} bytes"
        return FetchError("timeout", reason, phase=phase)

    def opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            aborted = self._aborted
        if aborted:
            _shut(sock)

    def connected(self, sock: socket.socket | None) -> None:
        """The connection is up (TLS included): from now on the server has ``read_s`` for each byte."""
        if sock is not None:
            self.opened(sock)
            if self.timeouts.read_s != float("inf"):
                sock.settimeout(self.timeouts.step_s(self.timeouts.read_s))
        self.phase = "answer"

    def tcp_up(self, sock: socket.socket, tls: bool) -> None:
        self.opened(sock)
        if tls:
            self.phase = "tls"

    def abort(self) -> None:
        with self._lock:
            self._aborted = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def run(self) -> None:
        try:
            self._outcome = self._exchange()
        except FetchError as exc:
            self._error = exc
        except BodyError as exc:
            self._error = FetchError("too_large" if exc.kind == "too_large" else "bad_answer", str(exc))
        except TimeoutError:
            self._error = self._timeout(whole=False)
        except urllib.error.URLError as exc:
            self._error = self._url_error(exc)
        except ssl.SSLError as exc:
            self._error = FetchError("tls", f"TLS failed ({_reason(exc)})")
        except (http.client.HTTPException, OSError, EOFError, zlib.error) as exc:
            self._error = FetchError("bad_answer", f"bad HTTP answer ({_reason(exc)})")
        except ValueError as exc:
            self._error = FetchError("bad_url", f"not a valid URL ({printable(str(exc))})")
        except Exception as exc:  # noqa: BLE001 - whatever urllib raises on a hostile answer is that answer's fault
            self._error = FetchError("bad_answer", f"bad HTTP answer ({type(exc).__name__})")
        finally:
            self.finished.set()

    def _exchange(self) -> tuple[int, bytearray]:
        handlers: list[urllib.request.BaseHandler] = [_Plain(self), _Tls(self)]
        if not self.proxies:
            handlers.append(urllib.request.ProxyHandler({}))
        opener = urllib.request.build_opener(*handlers)
        timeout_s = self.timeouts.step_s(self.timeouts.connect_s)
        try:
            response = opener.open(self.request, timeout=timeout_s)
        except urllib.error.HTTPError as exc:
            raise self._status_error(exc) from None
        self.phase = "read"
        with response:
            return response.status, read_body(response, self.max_bytes, received=self._note)

    def _note(self, received: int) -> None:
        self.received = received

    def _status_error(self, exc: urllib.error.HTTPError) -> FetchError:
        try:
            body = bytes(read_body(exc, ERROR_BODY_BYTES, truncate=True))
        except (http.client.HTTPException, OSError, EOFError, zlib.error, BodyError):
            body = b""
        finally:
            exc.close()
        if 300 <= exc.code < 400:
            loop = "infinite loop" in str(exc.reason)
            return FetchError("redirects", "redirected in a loop (the same address again, or more than 10 "
                                           "redirects)" if loop else f"redirected where it may not be followed "
                                                                     f"(HTTP {exc.code})", status=exc.code)
        retry = exc.headers.get("Retry-After") if exc.headers is not None else None
        retry_s = float(retry) if retry and retry.strip().isdigit() else None
        return FetchError("status", f"HTTP {exc.code} {printable(str(exc.reason))}", status=exc.code, body=body,
                          retry_after_s=retry_s)

    def _url_error(self, exc: urllib.error.URLError) -> FetchError:
        if isinstance(exc.reason, TimeoutError):
            return self._timeout(whole=False)
        if isinstance(exc.reason, ssl.SSLError):
            return FetchError("tls", f"TLS failed ({_reason(exc.reason)})")
        return FetchError("unreachable", f"unreachable ({_reason(exc.reason)})")


def _reason(reason: object) -> str:
    if isinstance(reason, ssl.SSLCertVerificationError) and reason.verify_message:
        return printable(f"certificate verify failed: {reason.verify_message}")
    if isinstance(reason, ssl.SSLError) and reason.reason:
        return printable(str(reason.reason).replace("_", " ").lower())
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
        _watch(conn, self._call, tls=False)
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
        _watch(conn, self._call, tls=True)
        return conn


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Made once: loading the system's certificates takes milliseconds, and the DCGM scrape asks twice a second."""
    return ssl.create_default_context()


def _watch(conn: http.client.HTTPConnection, call: _Call, *, tls: bool) -> None:
    """Hand every socket the connection opens (and, for TLS, its wrapped one) to the call, and tell it each step."""
    create = conn._create_connection  # type: ignore[attr-defined]
    connect = conn.connect

    def create_and_note(*args: Any, **kwargs: Any) -> socket.socket:
        call.phase = "connect"
        sock: socket.socket = create(*args, **kwargs)
        call.tcp_up(sock, tls)
        return sock

    def connect_and_note() -> None:
        connect()
        call.connected(conn.sock)

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
