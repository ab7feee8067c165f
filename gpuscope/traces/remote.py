"""Trace files behind a URL: listed where the analysis starts, each read by the worker that analyses it, every step
within the command's limits (``gpuscope.net.deadline.Timeouts``).

``http://`` and ``https://`` are read by gpuscope's own bounded HTTP request (``gpuscope.net.http``): the
connection and the TLS handshake within ``connect_s``, the first byte and every later pause within ``read_s``, the
whole by the command's deadline, each failure named (a refused connection, a TLS handshake that hangs, a redirect
loop, an HTTP status). A user and password in the URL are sent as basic auth (never after a redirect elsewhere).

The object stores (``s3://``, ``gs://``, ``az://``, ...) are read through fsspec. Each call into it is bounded by
the deadline (an async filesystem's call is cancelled there, which closes its connections); S3 also gets
``connect_s`` and ``read_s`` as botocore's connect and read timeouts (botocore and s3fs retry within the deadline).
Credentials and endpoints come from where each filesystem's own library looks for them (for S3, botocore's chain:
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, instance
roles; an S3-compatible endpoint from ``AWS_ENDPOINT_URL``, as the AWS tools read it), or for S3 from the URL itself
(``s3://KEY:SECRET@bucket/...``). gpuscope prints none: a message names the URL without its user, password or query,
says what went wrong in gpuscope's words, and a library's own words are shown only through
``gpuscope.model.redact.redact_text``.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from gpuscope.model.redact import bare_url, redact_text
from gpuscope.net.deadline import Timeouts
from gpuscope.net.http import FetchError, download, endpoint, request
from gpuscope.traces.errors import RemoteTimeout, TraceError
from gpuscope.traces.gunzip import Text, TooLarge
from gpuscope.traces.location import SourceFile

EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure",
          "adl": "azure"}
"""The gpuscope extra that installs each scheme's fsspec implementation."""
HTTP = ("http", "https")
READ_CHUNK_BYTES = 32 * 2**20
"""An object is read in ranges of this size: each a request of its own, bounded by the deadline."""
_T = TypeVar("_T")


def list_files(url: str, suffixes: tuple[str, ...], timeouts: Timeouts) -> list[SourceFile]:
    """The object ``url`` names, or the trace files directly under it when it is a folder (a prefix). An http(s)
    URL names one file (its size is known once it is read)."""
    if _scheme(url) in HTTP:
        return [SourceFile(location=url, size_bytes=0)]
    fs, path, userinfo = _filesystem(url, timeouts)
    with _errors(url, timeouts, "listing it"):
        try:
            info = _call(fs, timeouts, "info", path)
        except PermissionError:  # S3 describes a key only to who may read it; listing needs another right
            info = {"type": "directory"}
        if info.get("type") != "directory":
            return [SourceFile(location=url, size_bytes=int(info.get("size") or 0))]
        entries = _call(fs, timeouts, "ls", path, detail=True)
    # (A key listed as a folder lists as itself: it is read, and a refused read says so then.)
    files = sorted((e for e in entries if e.get("type") == "file" and str(e["name"]).endswith(suffixes)),
                   key=lambda e: str(e["name"]))
    if not files:
        raise TraceError(bare_url(url), "no trace files (*.json, *.json.gz) under this URL")
    return [SourceFile(location=_with_userinfo(fs.unstrip_protocol(str(e["name"])), userinfo),
                       size_bytes=int(e.get("size") or 0)) for e in files]


def read_file(url: str, *, max_bytes: int, timeouts: Timeouts) -> Text:
    """The whole object, as a writable array of bytes (the reader cuts chunks of events out of it in place);
    ``TooLarge`` past ``max_bytes``, before that much is read."""
    if _scheme(url) in HTTP:
        return _read_http(url, max_bytes=max_bytes, timeouts=timeouts)
    fs, path, _ = _filesystem(url, timeouts)
    with _errors(url, timeouts, "reading it"):
        size = _call(fs, timeouts, "info", path).get("size")
        if size is None:  # a store that does not say: read whole, then hold it to the cap
            whole = _call(fs, timeouts, "cat_file", path)
            if len(whole) > max_bytes:
                raise TooLarge(max_bytes)
            return np.frombuffer(bytearray(whole), dtype=np.uint8)
        if int(size) > max_bytes:
            raise TooLarge(max_bytes)
        data = np.empty(int(size), dtype=np.uint8)
        for start in range(0, data.size, READ_CHUNK_BYTES):
            end = min(start + READ_CHUNK_BYTES, data.size)
            piece = _call(fs, timeouts, "cat_file", path, start=start, end=end)
            if len(piece) != end - start:
                raise TraceError(bare_url(url), f"ended after {start + len(piece)} of its {data.size} bytes")
            data[start:end] = np.frombuffer(piece, dtype=np.uint8)
    return data


def _read_http(url: str, *, max_bytes: int, timeouts: Timeouts) -> Text:
    target = endpoint(url)
    try:
        body = download(request(target.url, headers={"Accept-Encoding": "gzip"}, authorization=target.authorization),
                        timeouts=timeouts, max_bytes=max_bytes)
    except FetchError as exc:
        if exc.kind == "too_large":
            raise TooLarge(max_bytes) from None
        raise _http_error(url, exc, timeouts) from None
    return np.frombuffer(body, dtype=np.uint8)


def _http_error(url: str, exc: FetchError, timeouts: Timeouts) -> TraceError:
    where = bare_url(url)
    if exc.kind == "timeout" and exc.whole:
        return RemoteTimeout(where, f"{exc}, the limit of the whole command (--timeout)")
    if exc.kind == "status" and exc.status is not None:
        return TraceError(where, _status_words(exc.status, str(exc)))
    if exc.kind == "unreachable":
        reason = str(exc).removeprefix("unreachable (").removesuffix(")")
        return TraceError(where, f"cannot connect: {reason[:1].lower()}{reason[1:]}")
    if exc.kind == "bad_answer":
        return TraceError(where, str(exc))
    return TraceError(where, redact_text(str(exc)))


def _status_words(status: int, text: str) -> str:
    if status in (404, 410):
        return f"no such file on the server ({text})"
    if status == 401:
        return f"the server wants credentials ({text}): give them as https://user:password@host/..."
    if status == 403:
        return f"the server refused to serve it ({text})"
    if status >= 500:
        return f"the server failed ({text})"
    return f"the server refused the request ({text})"


def _scheme(url: str) -> str:
    return urllib.parse.urlsplit(url).scheme.lower()


def _filesystem(url: str, timeouts: Timeouts) -> tuple[Any, str, str]:
    """The fsspec filesystem of ``url``, the path in it, and the user:password@ given in an s3:// URL (passed to
    botocore as its keys, and kept on the files listed under it)."""
    scheme = _scheme(url)
    extra = EXTRAS.get(scheme, "remote")
    try:
        import fsspec
    except ImportError as exc:
        raise TraceError(bare_url(url), f"reading URLs needs fsspec: pip install 'gpuscope[{extra}]'") from exc
    options: dict[str, Any] = {}
    userinfo = ""
    if EXTRAS.get(scheme) == "s3":
        options["config_kwargs"] = {"connect_timeout": timeouts.connect_s, "read_timeout": timeouts.read_s}
        url, userinfo, keys = _split_keys(url)
        options.update(keys)
    try:
        # A filesystem may connect as it is made (ftp:// does): that too is within the deadline.
        with _errors(url, timeouts, "connecting to it", passing=(ImportError, ValueError, TypeError)):
            fs, path = _in_thread(lambda: fsspec.core.url_to_fs(url, **options), timeouts.deadline.left_s())
    except ImportError as exc:
        raise TraceError(bare_url(url), f"reading {scheme}:// URLs needs its fsspec filesystem: "
                                        f"pip install 'gpuscope[{extra}]'") from exc
    except (ValueError, TypeError) as exc:
        raise TraceError(bare_url(url), f"{scheme}:// is not a scheme fsspec knows") from exc
    return fs, path, userinfo


def _split_keys(url: str) -> tuple[str, str, dict[str, str]]:
    """``s3://KEY:SECRET@bucket/...``: the URL without them, the ``KEY:SECRET@`` part, and s3fs's key and secret."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, "", {}
    key, _, secret = userinfo.partition(":")
    keys = {"key": urllib.parse.unquote(key), "secret": urllib.parse.unquote(secret)}
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), userinfo + "@", keys


def _with_userinfo(url: str, userinfo: str) -> str:
    if not userinfo:
        return url
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=userinfo + parts.netloc))


def _call(fs: Any, timeouts: Timeouts, name: str, *args: Any, **kwargs: Any) -> Any:
    """``fs.<name>(...)`` ended by the deadline: an async filesystem's coroutine is cancelled there (its connections
    closed); a blocking one is left to finish in its thread, and the caller goes on at once."""
    left_s = timeouts.deadline.left_s()
    if left_s <= 0:
        raise TimeoutError
    if getattr(fs, "async_impl", False):
        from fsspec.asyn import sync

        return sync(fs.loop, getattr(fs, f"_{name}"), *args, timeout=left_s, **kwargs)
    return _in_thread(lambda: getattr(fs, name)(*args, **kwargs), left_s)


def _in_thread(work: Callable[[], _T], left_s: float) -> _T:
    if left_s <= 0:
        raise TimeoutError
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, work()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name="gpuscope-remote", daemon=True).start()
    if not done.wait(left_s):
        raise TimeoutError
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


@contextmanager
def _errors(url: str, timeouts: Timeouts, doing: str,
            passing: tuple[type[Exception], ...] = ()) -> Iterator[None]:
    """Whatever the filesystem library raises (but ``passing``), as one line naming the URL (never its
    credentials)."""
    where = bare_url(url)
    kept: tuple[type[Exception], ...] = (TraceError, TooLarge, *passing)
    try:
        yield
    except kept:
        raise
    except Exception as exc:  # noqa: BLE001 - a remote store fails in its library's own types; each is one line
        raise _library_error(where, exc, timeouts, doing) from exc


def _library_error(where: str, exc: Exception, timeouts: Timeouts, doing: str) -> TraceError:
    names = {type(e).__name__ for e in _chain(exc)}
    if isinstance(exc, TimeoutError) and timeouts.deadline.left_s() <= 0.05:  # FSTimeoutError is one too
        return RemoteTimeout(where, f"no answer within {timeouts.deadline.seconds:g} s while {doing}, the limit of "
                                    "the whole command (--timeout)")
    if names & {"ConnectTimeoutError", "ConnectionTimeoutError"}:
        return TraceError(where, f"no connection within {timeouts.connect_s:g} s")
    if names & {"ReadTimeoutError", "SocketTimeoutError", "ServerTimeoutError", "TimeoutError"}:
        return TraceError(where, f"connected, but the server did not answer within {timeouts.read_s:g} s")
    if names & {"SSLError", "ClientSSLError", "ClientConnectorCertificateError", "SSLCertVerificationError"}:
        return TraceError(where, f"TLS failed: {_words(exc)}")
    if names & {"EndpointConnectionError", "ClientConnectorError", "ConnectionRefusedError"}:
        refused = "ConnectionRefusedError" in names or "refused" in _words(exc).lower()
        return TraceError(where, "cannot connect: connection refused" if refused else f"cannot connect: {_words(exc)}")
    if isinstance(exc, FileNotFoundError):
        return TraceError(where, "no such bucket" if "bucket" in str(exc).lower() else "no such file or folder")
    if isinstance(exc, PermissionError):
        return TraceError(where, "permission denied: the credentials in use may not read it")
    return TraceError(where, f"cannot read: {type(exc).__name__}: {_words(exc)}")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _words(exc: BaseException) -> str:
    """One line of a library's message, every secret in it masked (``redact_text``)."""
    return " ".join(redact_text(str(exc)).split())[:300]
