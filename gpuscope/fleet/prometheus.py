"""A small client for the Prometheus HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics speak the same one).

Only what fleet mode needs: range queries, their answers read by ``gpuscope.fleet.answers``. Every request goes
through ``gpuscope.net.http``: one deadline for all of a client's queries, a cap on each answer's size,
credentials kept out of messages. Transient refusals (HTTP 429, 502, 503, 504) are tried again a bounded number of
times within the deadline. Every failure becomes ``PrometheusError`` with one line a user can act on.
"""

from __future__ import annotations

import base64
import netrc
import os
import urllib.parse
from collections.abc import Mapping

from gpuscope.fleet.answers import (
    PrometheusError,
    PrometheusTimeout,
    QueryTooLarge,
    Series,
    error_text,
    parse_range,
)
from gpuscope.model.redact import about, redact_url
from gpuscope.net.http import Deadline, FetchError, endpoint, fetch, request

__all__ = ["ENV_NETRC", "ENV_TOKEN", "MAX_ANSWER_BYTES", "Prometheus", "PrometheusError", "PrometheusTimeout",
           "QueryTooLarge", "Series"]

ENV_TOKEN = "GPUSCOPE_PROMETHEUS_TOKEN"
"""A bearer token sent with every query, when set and the URL has no user:password."""
ENV_NETRC = "NETRC"
"""Where the netrc file is (default ~/.netrc): its entry for the server's host gives basic auth, as for curl."""
MAX_ANSWER_BYTES = 128 * 2**20
"""The most one answer may hold, inflated (a day of 1,000 GPUs is about 20 MB a metric). With four queries at once,
what the client holds of answers stays under four times this."""
RETRIES = 2
"""How many more times a query is sent after a transient refusal (HTTP 429, 502, 503, 504), within the deadline."""
RETRY_FIRST_S = 1.0
"""The wait before the first retry; it doubles at each one (a server's Retry-After, when given, is used instead)."""
_TRANSIENT = frozenset({429, 502, 503, 504})


class Prometheus:
    """Queries one Prometheus-compatible server; ``url`` is its base (e.g. http://prom:9090 or .../prometheus).

    ``timeout_s`` is one deadline for every query of this client together, retries and waits included, counted
    from its creation: however the server behaves (silent, dripping, endless), each call returns or raises
    ``PrometheusError`` by then. An answer larger than ``max_answer_bytes`` (inflated) is refused. Credentials: a
    user and password in the URL (sent as basic auth, never shown: ``url`` has them removed), else an
    ``Authorization`` header given in ``headers``, else ``GPUSCOPE_PROMETHEUS_TOKEN`` (a bearer token), else the
    netrc file's entry for the host (``NETRC``, default ~/.netrc).
    """

    def __init__(self, url: str, *, timeout_s: float = 60.0, headers: Mapping[str, str] | None = None,
                 env: Mapping[str, str] | None = None, max_answer_bytes: int = MAX_ANSWER_BYTES,
                 retries: int = RETRIES) -> None:
        env = os.environ if env is None else env
        if "://" not in url:
            url = "http://" + url
        target = endpoint(url)
        parts = _checked(target.url)
        self.url = urllib.parse.urlunsplit(parts._replace(query="", fragment="")).rstrip("/")
        """The base URL, without credentials (what messages, reports and the store show)."""
        # A day of 1,000 GPUs is tens of MB of JSON a metric; compressed, a tenth of that crosses the network.
        self.headers = {"Accept": "application/json", "Accept-Encoding": "gzip", **(headers or {})}
        given = next((v for k, v in self.headers.items() if k.lower() == "authorization"), None)
        self.headers = {k: v for k, v in self.headers.items() if k.lower() != "authorization"}
        self._authorization = (target.authorization or given
                               or (f"Bearer {env[ENV_TOKEN]}" if env.get(ENV_TOKEN) else None)
                               or _netrc_authorization(parts.hostname or "", env))
        self.timeout_s = timeout_s
        self.deadline = Deadline(timeout_s)
        self.max_answer_bytes = max_answer_bytes
        self.retries = retries
        self.warnings: list[str] = []
        """Warnings the server attached to its answers (partial data from a store gateway, say)."""

    def cancel(self) -> None:
        """End the queries in flight now and refuse later ones (another query of the same fetch failed)."""
        self.deadline.cancel()

    def query_range(self, promql: str, *, start_s: float, end_s: float, step_s: float) -> list[Series]:
        """``/api/v1/query_range``: each series with its points; NaN values (and DCGM's none) stay as given."""
        form = {"query": promql, "start": _num(start_s), "end": _num(end_s), "step": _num(step_s)}
        answer = parse_range(self._post("/api/v1/query_range", form), self.url)
        self.warnings.extend(answer.warnings)
        return answer.series

    def _post(self, path: str, form: Mapping[str, str]) -> bytes:
        body = urllib.parse.urlencode(form).encode()
        headers = {**self.headers, "Content-Type": "application/x-www-form-urlencoded"}
        tries = 0
        while True:
            tries += 1
            try:
                return fetch(request(self.url + path, data=body, headers=headers, authorization=self._authorization),
                             deadline=self.deadline, max_bytes=self.max_answer_bytes).body
            except FetchError as exc:
                if not self._retry(exc, tries):
                    raise self._failure(exc, tries) from None

    def _retry(self, exc: FetchError, tries: int) -> bool:
        """Wait and say yes when a transient refusal may pass on another try before the deadline."""
        if exc.kind != "status" or exc.status not in _TRANSIENT or tries > self.retries:
            return False
        wait_s = exc.retry_after_s if exc.retry_after_s is not None else RETRY_FIRST_S * 2 ** (tries - 1)
        return self.deadline.wait(wait_s)

    def _failure(self, exc: FetchError, tries: int) -> PrometheusError:
        where = f"Prometheus at {self.url}"
        if exc.kind == "timeout":
            return PrometheusTimeout(f"{where} did not answer within {self.timeout_s:g} s")
        if exc.kind == "too_large":
            return PrometheusError(f"{where} answered more than {self.max_answer_bytes / 2**20:g} MiB to one query; "
                                   f"narrow --selector, or use a larger --step or a shorter window")
        if exc.kind == "status" and exc.status is not None:
            message = self._http_error(exc.status, str(exc), error_text(exc.body))
            if tries > 1:
                message += f" (tried {tries} times)"
            if exc.status == 422 and "too many samples" in message:
                return QueryTooLarge(message)
            return PrometheusError(message)
        if exc.kind == "unreachable":
            return PrometheusError(f"{where} is {exc}")
        return PrometheusError(about(where, str(exc)))

    def _http_error(self, code: int, status: str, detail: str) -> str:
        where = f"Prometheus at {self.url}"
        if code in (401, 403):
            how = ("set the user in the URL (http://user:password@host:9090) or in a netrc file, or a bearer token "
                   "in " + ENV_TOKEN)
            what = "needs credentials" if code == 401 else "refused these credentials"
            return f"{where} {what} (HTTP {code}): {how}"
        if code == 404:
            return about(where, "no query API there (HTTP 404); give the server's base URL, e.g. http://host:9090")
        if code == 422 or "exceeded maximum resolution" in detail or "too many samples" in detail:
            return (f"{where} refused the query as too large (HTTP {code}: {detail}); "
                    f"use a larger --step or a shorter window")
        if code == 400:
            return f"{where} rejected the query (HTTP 400: {detail or status}); check --selector"
        return about(where, status + (f": {detail}" if detail else ""))


def _checked(url: str) -> urllib.parse.SplitResult:
    """The parts of a usable http(s) URL, else PrometheusError (the URL shown without credentials)."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise PrometheusError(f"not a Prometheus URL: {redact_url(url)!r} (expected http://host:port)")
    return parts


def _netrc_authorization(host: str, env: Mapping[str, str]) -> str | None:
    """Basic auth from the netrc file's entry for ``host`` (or its default entry); None without one."""
    path = env.get(ENV_NETRC) or os.path.join(os.path.expanduser("~"), ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return None
    if entry is None:
        return None
    login, _account, password = entry
    return "Basic " + base64.b64encode(f"{login}:{password}".encode()).decode()


def _num(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")
