"""An HTTP answer's body read under a cap: inflated piece by piece when gzip-encoded (the cap counts the inflated
bytes, so a small answer that inflates to gigabytes is stopped at the cap), read straight into one buffer when its
length is declared, and an answer that ends before its declared length is an error, not a shorter answer."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

CHUNK_BYTES = 1 << 16
_GZIP = 16 + zlib.MAX_WBITS


class BodyError(Exception):
    """The body cannot be had: ``too_large`` (past the cap) or ``bad_answer`` (cut short, a broken gzip stream)."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


def read_body(response: Any, max_bytes: int, *, truncate: bool = False,
              received: Callable[[int], None] | None = None) -> bytearray:
    """The body, inflated when gzip-encoded; BodyError("too_large") past ``max_bytes`` (or, with ``truncate``,
    the first ``max_bytes``), BodyError("bad_answer") when it ends before its declared length. ``received`` is
    told the count of bytes that came over the wire so far, after each read."""
    length = response.headers.get("Content-Length", "")
    declared = int(length) if length.isdigit() else None
    gzipped = response.headers.get("Content-Encoding", "").strip().lower() == "gzip"
    if not truncate and not gzipped and declared is not None and declared > max_bytes:
        raise BodyError("too_large", f"answer larger than {size_text(max_bytes)}")
    if not gzipped and declared is not None and not truncate:
        return _read_declared(response, declared, received)
    return _read_stream(response, max_bytes, declared, truncate=truncate, gzipped=gzipped, received=received)


def _read_declared(response: Any, declared: int, received: Callable[[int], None] | None) -> bytearray:
    """A body of a declared length, read into one buffer of that length (no copy, no growth)."""
    out = bytearray(declared)
    read = _reader(response)
    got = 0
    while got < declared:
        chunk = read(min(declared - got, 1 << 20))
        if not chunk:
            # http.client hands over what came when the server closes early, without a word
            raise BodyError("bad_answer", f"bad HTTP answer (cut short: {got} of {declared} bytes)")
        out[got:got + len(chunk)] = chunk
        got += len(chunk)
        if received is not None:
            received(got)
    return out


def _reader(response: Any) -> Callable[[int], bytes]:
    """``read1``: what has come, at most ``n`` bytes (one read of the socket), where ``read`` would wait for all
    ``n``; so the bytes received are known as they come, a byte a second included."""
    return getattr(response, "read1", response.read)  # type: ignore[no-any-return]


def _read_stream(response: Any, max_bytes: int, declared: int | None, *, truncate: bool, gzipped: bool,
                 received: Callable[[int], None] | None) -> bytearray:
    out = bytearray()
    inflate = _Inflate() if gzipped else None
    read = _reader(response)
    got = 0
    while len(out) <= max_bytes:
        chunk = read(CHUNK_BYTES)
        got += len(chunk)
        if received is not None:
            received(got)
        if not chunk:
            if declared is not None and got < declared:
                raise BodyError("bad_answer", f"bad HTTP answer (cut short: {got} of {declared} bytes)")
            if inflate is not None:
                inflate.finish()
            return out
        out += inflate.more(chunk, max_bytes + 1 - len(out)) if inflate is not None else chunk
    if truncate:
        del out[max_bytes:]
        return out
    raise BodyError("too_large", f"answer larger than {size_text(max_bytes)}")


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
            raise BodyError("bad_answer", "bad HTTP answer (gzip stream cut short)")


def size_text(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:g} MiB" if n_bytes >= 2**20 else f"{n_bytes} bytes"
