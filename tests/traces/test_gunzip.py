"""Gunzip into one array: the same bytes as the standard library, with ISA-L or with zlib."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from gpuscope.traces import gunzip as gz


@pytest.fixture(params=["default", "zlib"])
def inflate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "zlib":
        monkeypatch.setattr(gz, "inflate", zlib)
    return str(request.param)


def test_same_bytes_as_the_standard_library(inflate: str) -> None:
    text = b"".join(b'{"ph": "X", "name": "k%d", "ts": %d}' % (i, i * 7) for i in range(200_000))
    packed = gzip.compress(text, compresslevel=1)
    out = gz.gunzip(packed)
    assert out.dtype == np.uint8 and out.flags.writeable and out.tobytes() == text


def test_concatenated_members_and_trailing_zeros(inflate: str) -> None:
    packed = gzip.compress(b"first,") + gzip.compress(b"second") + b"\0\0"
    assert gz.gunzip(packed).tobytes() == b"first,second"


def test_a_trailer_too_small_for_the_data_still_reads(inflate: str) -> None:
    big = gzip.compress(b"x" * 3_000_000)
    packed = big + gzip.compress(b"y")  # the last member's trailer says 1 byte
    assert gz.gunzip(packed).tobytes() == b"x" * 3_000_000 + b"y"


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_truncated_streams_raise(inflate: str, cut: float) -> None:
    packed = gzip.compress(bytes(range(256)) * 4000)
    with pytest.raises(gz.ERRORS):
        gz.gunzip(packed[: int(len(packed) * cut)])


def test_corrupt_stream_raises(inflate: str) -> None:
    with pytest.raises(gz.ERRORS):
        gz.gunzip(b"\x1f\x8b" + b"garbage" * 10)


def test_the_streaming_reader_gives_the_same_bytes_holds_a_piece_and_stops_at_its_cap(inflate: str) -> None:
    import io

    text = b"".join(b"entry %d;" % i for i in range(300_000))
    packed = gzip.compress(text[:1000]) + b"\0" * 3 + gzip.compress(text[1000:], compresslevel=1) + b"\0"
    assert io.BufferedReader(gz.GunzipReader(io.BytesIO(packed), max_bytes=len(text))).read() == text
    assert gz.inflated_size(io.BytesIO(packed), max_bytes=len(text)) == len(text)
    with pytest.raises(gz.TooLarge):
        gz.inflated_size(io.BytesIO(packed), max_bytes=len(text) - 1)
    with pytest.raises(EOFError):
        gz.inflated_size(io.BytesIO(packed[:-40]), max_bytes=len(text))
    with pytest.raises(gz.ERRORS):
        gz.inflated_size(io.BytesIO(b"\x1f\x8b" + b"\xff" * 30), max_bytes=len(text))
