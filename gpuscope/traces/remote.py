"""Trace files behind an fsspec URL: listed where the analysis starts, each read by the worker that analyses it.

Credentials and endpoints come from where each filesystem's own library looks for them (for S3, botocore's chain:
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, instance
roles; an S3-compatible endpoint from ``AWS_ENDPOINT_URL``, as the AWS tools read it). gpuscope passes none and
prints none: a message names the URL without its user, password or query (where a signed URL keeps its signature),
says what went wrong in gpuscope's words, and any credential the environment holds is blanked out of the
library's own words where they are quoted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from gpuscope.traces.errors import TraceError
from gpuscope.traces.gunzip import Text, TooLarge
from gpuscope.traces.location import SourceFile, redact

EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure",
          "adl": "azure", "http": "remote", "https": "remote"}
"""The gpuscope extra that installs each scheme's fsspec implementation."""
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL|SAS|CONNECTION_STRING", re.IGNORECASE)


def list_files(url: str, suffixes: tuple[str, ...]) -> list[SourceFile]:
    """The object ``url`` names, or the trace files directly under it when it is a folder (a prefix)."""
    fs, path = _filesystem(url)
    with _errors(url):
        try:
            info = fs.info(path)
        except PermissionError:  # S3 describes a key only to who may read it; listing needs another right
            info = {"type": "directory"}
        if info.get("type") != "directory":
            return [SourceFile(location=url, size_bytes=int(info.get("size") or 0))]
        entries = fs.ls(path, detail=True)
    # (A key listed as a folder lists as itself: it is read, and a refused read says so then.)
    files = sorted((e for e in entries if e.get("type") == "file" and str(e["name"]).endswith(suffixes)),
                   key=lambda e: str(e["name"]))
    if not files:
        raise TraceError(redact(url), "no trace files (*.json, *.json.gz) under this URL")
    return [SourceFile(location=fs.unstrip_protocol(str(e["name"])), size_bytes=int(e.get("size") or 0))
            for e in files]


def read_file(url: str, *, max_bytes: int) -> Text:
    """The whole object, as a writable array of bytes (the reader cuts chunks of events out of it in place);
    ``TooLarge`` past ``max_bytes``, before that much is read."""
    fs, path = _filesystem(url)
    with _errors(url), fs.open(path, "rb", cache_type="none") as f:
        size = f.size
        if size is None:  # a server that does not say (HTTP without Content-Length): read up to the cap
            whole = f.read(max_bytes + 1)
            if len(whole) > max_bytes:
                raise TooLarge(max_bytes)
            return np.frombuffer(bytearray(whole), dtype=np.uint8)
        if int(size) > max_bytes:
            raise TooLarge(max_bytes)
        data = np.empty(int(size), dtype=np.uint8)
        got = 0
        while got < data.size and (n := f.readinto(data.data[got:])):
            got += n
    if got < data.size:
        raise TraceError(redact(url), f"ended after {got} of its {data.size} bytes")
    return data


def _filesystem(url: str) -> tuple[Any, str]:
    scheme = urlsplit(url).scheme.lower()
    extra = EXTRAS.get(scheme, "remote")
    try:
        import fsspec
    except ImportError as exc:
        raise TraceError(redact(url), f"reading URLs needs fsspec: pip install 'gpuscope[{extra}]'") from exc
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:
        raise TraceError(redact(url), f"reading {scheme}:// URLs needs its fsspec filesystem: "
                                      f"pip install 'gpuscope[{extra}]'") from exc
    except ValueError as exc:
        raise TraceError(redact(url), f"{scheme}:// is not a scheme fsspec knows") from exc
    return fs, path


@contextmanager
def _errors(url: str) -> Iterator[None]:
    """Whatever the filesystem library raises, as one line naming the URL (never its credentials)."""
    where = redact(url)
    try:
        yield
    except TraceError:
        raise
    except FileNotFoundError as exc:
        what = "no such bucket" if "bucket" in str(exc).lower() else "no such file or folder"
        raise TraceError(where, what) from exc
    except PermissionError as exc:
        raise TraceError(where, "permission denied: the credentials in use may not read it") from exc
    except Exception as exc:  # noqa: BLE001 - a remote store fails in its library's own types; each is one line
        raise TraceError(where, f"cannot read: {type(exc).__name__}: {_scrub(str(exc))}") from exc


def _scrub(text: str) -> str:
    """One line of a library's message, with every credential the environment holds blanked out."""
    for name, value in os.environ.items():
        if _SECRET_NAME.search(name) and len(value) >= 8:
            text = text.replace(value, "***")
    return " ".join(text.split())[:300]
