"""Gunzip a whole trace into one buffer: ISA-L's inflate when installed (about 2-3x zlib's speed), else zlib.

The output goes into an array sized from the gzip trailer (the uncompressed size, mod 2**32) and never zeroed,
so the text is held once rather than as the list of pieces plus their join that ``gzip.decompress`` builds at
its peak. When the trailer does not tell the whole size (several members, or more than 4 GiB), a first pass
measures it. A cap on the output stops a stream that inflates past it (a few MB that would become GBs) as soon
as it does, without holding more than the cap. ``GunzipReader`` inflates a stream as it is read instead (a pickle
for the unpickler), holding a piece at a time, under the same kind of cap.
"""

from __future__ import annotations

import importlib
import io
import struct
import zlib
from types import ModuleType
from typing import IO, Any, TypeAlias

import numpy as np
import numpy.typing as npt

Text: TypeAlias = npt.NDArray[np.uint8]
"""A trace's JSON text: a writable 1-D array of bytes (see ``chunks``)."""
Buffer: TypeAlias = bytes | bytearray | Text


def _inflate_module() -> ModuleType:
    try:
        return importlib.import_module("isal.isal_zlib")
    except ImportError:  # a platform without isal wheels
        return zlib


inflate = _inflate_module()
ERRORS: tuple[type[BaseException], ...] = (EOFError, zlib.error, inflate.error)
"""What a corrupt or truncated stream raises."""

GZIP_MAGIC = b"\x1f\x8b"
MAX_RATIO = 256
"""A trailer claiming more than this many bytes out per byte in is not trusted (a truncated file ends in
arbitrary bytes); Kineto JSON gzips 10-30x."""
_PIECE_BYTES = 1 << 22
_GZIP_WINDOW = 16 + zlib.MAX_WBITS


class TooLarge(Exception):
    """The stream inflates to more than the cap; ``max_bytes`` is that cap."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"inflates to more than {max_bytes} bytes")
        self.max_bytes = max_bytes


def gunzip(data: Buffer, *, max_bytes: int | None = None) -> Text:
    """The concatenated members of a gzip stream, decompressed; EOFError when it is truncated, TooLarge as soon as
    the output passes ``max_bytes``."""
    cap = max_bytes if max_bytes is not None else np.iinfo(np.int64).max
    out = np.empty(min(_size_hint(data), cap), dtype=np.uint8)  # not zeroed: every byte kept is written
    size = _inflate_into(data, out, cap)
    if size > out.size:  # the trailer's size was wrapped (> 4 GiB) or only the last of several members'
        out = np.empty(size, dtype=np.uint8)
        _inflate_into(data, out, cap)
    return out[:size]


def _inflate_into(data: Buffer, out: Text, cap: int) -> int:
    """Inflate every member of ``data`` into ``out`` as far as it holds; the size of the whole output."""
    source = data.data if isinstance(data, np.ndarray) else memoryview(data)
    size = 0
    offset = 0
    while offset < len(source):
        decoder = inflate.decompressobj(_GZIP_WINDOW)
        pending: bytes | memoryview = source[offset:]
        while True:
            piece = decoder.decompress(pending, _PIECE_BYTES)
            if size + len(piece) <= out.size:
                out[size:size + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
            size += len(piece)
            if size > cap:
                raise TooLarge(cap)
            if decoder.eof:
                break
            pending = decoder.unconsumed_tail
            if not pending and not piece:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
        offset = len(source) - len(decoder.unused_data)
        while offset < len(source) and source[offset] == 0:  # zero padding between members
            offset += 1
    return size


def _size_hint(data: Buffer) -> int:
    """The last member's uncompressed size from its trailer, when plausible; else 0 (the buffer grows)."""
    if len(data) < 18:
        return 0
    size: int = struct.unpack("<I", bytes(data[-4:]))[0]
    return size if size <= MAX_RATIO * len(data) else 0


class GunzipReader(io.RawIOBase):
    """The concatenated members of the gzip stream in ``raw``, inflated as they are read (ISA-L's inflate when
    installed), for a reader that takes a file: ``TooLarge`` as soon as more than ``max_bytes`` come out, so a
    stream is measured, or read, holding a piece at a time."""

    def __init__(self, raw: IO[bytes], *, max_bytes: int) -> None:
        super().__init__()
        self.raw = raw
        self.max_bytes = max_bytes
        self.inflated_bytes = 0
        self._decoder: Any = None
        self._pending = b""
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not self._done:
            piece = self._next(len(view))
            if piece:
                view[:len(piece)] = piece
                self.inflated_bytes += len(piece)
                if self.inflated_bytes > self.max_bytes:
                    raise TooLarge(self.max_bytes)
                return len(piece)
        return 0

    def _next(self, most: int) -> bytes:
        """Up to ``most`` bytes out (maybe none, while a member's header is read); sets ``_done`` at the end."""
        if self._decoder is None:
            self._pending = self._pending.lstrip(b"\0")  # zero padding between members
            while not self._pending:
                more = self.raw.read(_PIECE_BYTES)
                if not more:  # the end, between members
                    self._done = True
                    return b""
                self._pending = more.lstrip(b"\0")
            self._decoder = inflate.decompressobj(_GZIP_WINDOW)
        decoder = self._decoder
        if not self._pending:
            self._pending = self.raw.read(_PIECE_BYTES)
            if not self._pending and not decoder.eof:
                raise EOFError("compressed file ended before the end-of-stream marker was reached")
        piece: bytes = decoder.decompress(self._pending, most)
        self._pending = decoder.unconsumed_tail
        if decoder.eof:
            self._pending = decoder.unused_data
            self._decoder = None
        return piece


def inflated_size(raw: IO[bytes], *, max_bytes: int) -> int:
    """How many bytes the gzip stream in ``raw`` inflates to, read to its end (nothing held);
    ``TooLarge`` past ``max_bytes``."""
    reader = GunzipReader(raw, max_bytes=max_bytes)
    buffer = bytearray(_PIECE_BYTES)
    while reader.readinto(buffer):
        pass
    return reader.inflated_bytes
