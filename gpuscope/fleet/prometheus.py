"""A small client for the Prometheus HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics speak the same one).

Only what fleet mode needs: range queries, decoded with msgspec straight into typed structs (a 1,000-GPU answer is
tens of MB of JSON). Every failure becomes ``PrometheusError`` with one line a user can act on.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec
import numpy as np

ENV_TOKEN = "GPUSCOPE_PROMETHEUS_TOKEN"
"""A bearer token sent with every query, when set (a URL's user:password is sent as basic auth)."""


class PrometheusError(Exception):
    """A query failed; the message is one line."""


class QueryTooLarge(PrometheusError):
    """The server would load too many samples for one query (HTTP 422): the same query over less time may pass."""


class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: msgspec.Raw = msgspec.Raw(b"[]")
    """[[unix_s, "value"], ...], parsed by numpy in one pass (a Python object per point would cost 10x the memory)."""


class _Data(msgspec.Struct):
    resultType: str  # noqa: N815 - the API's spelling
    result: list[_Series]


class _Answer(msgspec.Struct):
    status: str
    data: _Data | None = None
    errorType: str | None = None  # noqa: N815
    error: str | None = None
    warnings: list[str] = []


_decoder = msgspec.json.Decoder(_Answer)


@dataclass(frozen=True, eq=False)
class Series:
    """One series of a range query: its labels and its points (seconds since the epoch, float values)."""

    labels: dict[str, str]
    times_s: np.ndarray
    values: np.ndarray


class Prometheus:
    """Queries one Prometheus-compatible server; ``url`` is its base (e.g. http://prom:9090 or .../prometheus)."""

    def __init__(self, url: str, *, timeout_s: float = 60.0, headers: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        if "://" not in url:
            url = "http://" + url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise PrometheusError(f"not a Prometheus URL: {url!r} (expected http://host:port)")
        # A day of 1,000 GPUs is tens of MB of JSON a metric; compressed, a tenth of that crosses the network.
        self.headers = {"Accept": "application/json", "Accept-Encoding": "gzip", **(headers or {})}
        if parts.username is not None:
            secret = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            parts = parts._replace(netloc=netloc)
        elif env.get(ENV_TOKEN):
            self.headers["Authorization"] = f"Bearer {env[ENV_TOKEN]}"
        self.url = urllib.parse.urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        self.timeout_s = timeout_s
        self.warnings: list[str] = []
        """Warnings the server attached to its answers (partial data from a store gateway, say)."""

    def query_range(self, promql: str, *, start_s: float, end_s: float, step_s: float) -> list[Series]:
        """``/api/v1/query_range``: each series with its points; NaN values (and DCGM's none) stay as given."""
        form = {"query": promql, "start": _num(start_s), "end": _num(end_s), "step": _num(step_s)}
        answer = self._post("/api/v1/query_range", form)
        if answer.data is None or answer.data.resultType != "matrix":
            raise PrometheusError(f"{self.url}: expected a matrix from query_range, got "
                                  f"{answer.data.resultType if answer.data else 'no data'}")
        return [self._series(s) for s in answer.data.result]

    def _series(self, raw: _Series) -> Series:
        text = bytes(raw.values)
        points = text.count(b"[") - 1
        flat = np.fromstring(text.translate(None, b'[]"'), sep=",") if points > 0 else np.empty(0)
        if flat.size != 2 * max(points, 0):
            raise PrometheusError(f"{self.url} answered a series with malformed points ({text[:80]!r})")
        pairs = flat.reshape(-1, 2)
        return Series(labels=raw.metric, times_s=pairs[:, 0].copy(), values=pairs[:, 1].copy())

    def _post(self, path: str, form: Mapping[str, str]) -> _Answer:
        body = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(self.url + path, data=body, method="POST",
                                         headers={**self.headers, "Content-Type": "application/x-www-form-urlencoded"})
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as response:
                raw: bytes = response.read()
                if response.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
        except urllib.error.HTTPError as exc:
            message = self._http_error(exc)
            if exc.code == 422 and "too many samples" in message:
                raise QueryTooLarge(message) from None
            raise PrometheusError(message) from None
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise PrometheusError(f"Prometheus at {self.url} did not answer within {self.timeout_s:g} s") from None
            raise PrometheusError(f"Prometheus at {self.url} is unreachable ({_reason(reason)})") from None
        except TimeoutError:
            raise PrometheusError(f"Prometheus at {self.url} did not answer within {self.timeout_s:g} s") from None
        except (http.client.HTTPException, OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise PrometheusError(f"Prometheus at {self.url}: bad HTTP answer ({_reason(exc)})") from None
        answer = self._decode(raw)
        if answer.status != "success":
            raise PrometheusError(f"Prometheus at {self.url}: {answer.errorType or 'error'}: {answer.error}")
        self.warnings.extend(answer.warnings)
        return answer

    def _decode(self, raw: bytes) -> _Answer:
        try:
            return _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise PrometheusError(f"{self.url} answered, but not with the Prometheus API's JSON "
                                  f"(is it a Prometheus server, and is the URL its base?)") from None

    def _http_error(self, exc: urllib.error.HTTPError) -> str:
        where = f"Prometheus at {self.url}"
        if exc.code in (401, 403):
            how = "set the user in the URL (http://user:password@host:9090) or a bearer token in " + ENV_TOKEN
            what = "needs credentials" if exc.code == 401 else "refused these credentials"
            return f"{where} {what} (HTTP {exc.code}): {how}"
        if exc.code == 404:
            return f"{where}: no query API there (HTTP 404); give the server's base URL, e.g. http://host:9090"
        detail = _error_text(exc)
        if exc.code == 422 or "exceeded maximum resolution" in detail or "too many samples" in detail:
            return (f"{where} refused the query as too large (HTTP {exc.code}: {detail}); "
                    f"use a larger --step or a shorter window")
        if exc.code == 400:
            return f"{where} rejected the query (HTTP 400: {detail or exc.reason}); check --selector"
        return f"{where}: HTTP {exc.code} {exc.reason}" + (f": {detail}" if detail else "")


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read(65536)
        if exc.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
    except (OSError, EOFError):
        return ""
    try:
        answer = _decoder.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return raw.decode("utf-8", errors="replace").strip().splitlines()[0][:300] if raw.strip() else ""
    return (answer.error or "").strip().replace("\n", " ")


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _reason(reason: object) -> str:
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__


# Proxies from the environment are honoured: a Prometheus is often reached through one, unlike an exporter.
_OPENER = urllib.request.build_opener()
