"""GPU counters scraped from a dcgm-exporter endpoint (Prometheus text format, default port 9400).

DCGM adds what NVML alone cannot give: the profiling fields (SM active, SM occupancy, tensor pipe, DRAM
active), which also work on MIG instances where NVML has no utilization. The text is parsed with
prometheus_client's parser, and every dialect the exporter has spoken is accepted: DCGM_FI_* names and the
old ``dcgm_*`` names of dcgm-exporter 1.x (and their lowercase ``--use-old-namespace`` spelling),
``UUID``/``uuid``, ``Hostname``/``hostname``, MIG ``GPU_I_PROFILE``/``GPU_I_ID``, ``pci_bus_id``, and
container/pod labels in both spellings. DCGM's "blank" sentinels (e.g. 9223372036854775794, not supported)
are dropped, never recorded. A scrape that fails (timeout, refused, HTTP error, garbage) is a gap: it is
counted, its reason kept in one line, and the sampler goes on.
"""

from __future__ import annotations

import urllib.parse

from gpuscope.collectors import exposition
from gpuscope.collectors.dcgm_fields import DcgmDevice, device_of, field_of, field_value
from gpuscope.model.redact import about, redact_url
from gpuscope.model.schema import (
    DCGM,
    NO_PID,
    SampleRow,
)
from gpuscope.net.http import Deadline, Endpoint, FetchError, endpoint, fetch, request

DEFAULT_URL = "http://localhost:9400/metrics"
_MIB = 2**20
# A real scrape of an 8-GPU node is well under 1 MiB and some hundreds of the fields mapped here (eight GPUs of
# seven MIG instances each, a few thousand). The parser takes tens of microseconds a line and cannot be stopped
# part way, so both are capped: a scrape past either costs a tick at most a second or so, and is a gap.
_MAX_BODY_BYTES = 16 * _MIB
MAX_SERIES = 20_000
"""The most lines of mapped DCGM fields one scrape may hold."""
# A dead endpoint costs up to timeout_s per tick, which would slow every other collector of the loop:
# after a few failures in a row, scrape only after a wait that doubles up to half a minute.
_BACKOFF_AFTER = 3
_BACKOFF_FIRST_NS = 1_000_000_000
_BACKOFF_MAX_NS = 30_000_000_000


class ScrapeError(Exception):
    """A scrape gave nothing usable; the message is one line."""


def parse_scrape(text: str, now_ns: int, *, hostname: str | None = None) -> list[SampleRow]:
    """Samples (at ``now_ns``) of a dcgm-exporter scrape; raises ``ScrapeError`` when the text is not exposition.

    With ``hostname``, series labelled with another host are skipped (unlabelled ones are kept).
    Series without a ``gpu`` label (DataDog's dummy fixtures) cannot be attributed and are skipped.
    """
    rows, _devices, _series = _parse(text, now_ns, hostname)
    return rows


def describe_scrape(text: str, *, hostname: str | None = None) -> dict[int, DcgmDevice]:
    """The devices a scrape's labels describe, by ``gpu`` column value (MIG instances apart)."""
    return _parse(text, 0, hostname)[1]


class DcgmSampler:
    """Scrapes a dcgm-exporter endpoint once per tick; a failed scrape is a gap, never an exception."""

    name = DCGM

    def __init__(self, url: str, *, timeout_s: float = 0.5) -> None:
        """``url`` may omit the scheme and path: "gpu-node:9400" means http://gpu-node:9400/metrics.
        ``timeout_s`` bounds each scrape as a whole (connecting, waiting, reading), however the endpoint behaves.
        A user and password in the URL are sent as basic auth and never shown."""
        self._target = endpoint(normalize_url(url, keep_credentials=True))
        self.timeout_s = timeout_s
        self.gaps = 0
        """Scrapes that gave nothing (timeout, refused, HTTP error, garbage, no DCGM metric)."""
        self.last_error: str | None = None
        """One line about the most recent gap; kept after the endpoint recovers."""
        self.devices: dict[int, DcgmDevice] = {}
        """The labels of the last good scrape, by ``gpu`` column value."""
        self._failures = 0
        self._retry_ns: int | None = None

    @property
    def url(self) -> str:
        """The endpoint as it may be shown: without credentials."""
        return self._target.shown

    @url.setter
    def url(self, url: str) -> None:
        self._target = endpoint(normalize_url(url, keep_credentials=True))

    @staticmethod
    def probe(url: str, timeout_s: float = 0.5) -> str | None:
        """One scrape now: None when it gives DCGM samples, else one line saying what is wrong."""
        try:
            _scrape(endpoint(normalize_url(url, keep_credentials=True)), timeout_s, 0)
        except ScrapeError as exc:
            return about(f"DCGM endpoint {normalize_url(url)}", str(exc))
        return None

    def sample(self, now_ns: int) -> list[SampleRow]:
        """The endpoint's samples now, or [] (and one more gap) when the scrape fails.

        After ``_BACKOFF_AFTER`` failures in a row the endpoint is left alone for 1 s, then 2, 4, ... 30 s
        (ticks in that wait return [] without a scrape and are not counted as gaps); a good scrape resets it.
        """
        if self._retry_ns is not None and now_ns < self._retry_ns:
            return []
        try:
            rows, self.devices = _scrape(self._target, self.timeout_s, now_ns)
        except ScrapeError as exc:
            self.gaps += 1
            self.last_error = about(f"DCGM endpoint {self.url}", str(exc))
            self._failures += 1
            if self._failures >= _BACKOFF_AFTER:
                wait_ns = _BACKOFF_FIRST_NS << min(self._failures - _BACKOFF_AFTER, 5)
                self._retry_ns = now_ns + min(wait_ns, _BACKOFF_MAX_NS)
            return []
        self._failures, self._retry_ns = 0, None
        return rows

    def close(self) -> None:
        """Nothing to release: every scrape opens and closes its own connection."""


def normalize_url(url: str, *, keep_credentials: bool = False) -> str:
    """Add the http scheme and the /metrics path when left out (a malformed URL is left for the scrape to report);
    a user and password in it are replaced by *** unless ``keep_credentials``."""
    if "://" not in url:
        url = "http://" + url
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url if keep_credentials else redact_url(url)
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    full = urllib.parse.urlunsplit(parts)
    return full if keep_credentials else redact_url(full)


def _scrape(target: Endpoint, timeout_s: float, now_ns: int) -> tuple[list[SampleRow], dict[int, DcgmDevice]]:
    rows, devices, series = _parse(_fetch(target, timeout_s), now_ns, None)
    if series == 0:
        raise ScrapeError("answered, but with no DCGM metric (is it dcgm-exporter?)")
    return rows, devices


def _fetch(target: Endpoint, timeout_s: float) -> str:
    """The body of one GET within ``timeout_s`` in all, or ScrapeError with the reason in a few words.
    Proxies are skipped: dcgm-exporter is scraped on the node or inside the cluster, as Prometheus does."""
    try:
        answer = fetch(request(target.url, authorization=target.authorization), deadline=Deadline(timeout_s),
                       max_bytes=_MAX_BODY_BYTES, proxies=False)
    except FetchError as exc:
        raise ScrapeError(str(exc)) from None
    return answer.body.decode("utf-8", errors="replace")


# -- parsing ---------------------------------------------------------------------------------------


def _select(text: str) -> tuple[list[str], int, bool]:
    """The sample lines of the DCGM fields gpuscope maps, how many DCGM series the text holds, and whether
    it holds other lines. Picking lines by name first spares the parser the fields nobody reads."""
    keep: list[str] = []
    series = 0
    other = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name = (stripped.split("{", 1)[0].split() or [""])[0]
        if name[:5].lower() != "dcgm_":
            other = True
            continue
        series += 1
        if field_of(name) is not None:
            keep.append(stripped)
    return keep, series, other


def _samples(lines: list[str]) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of the given sample lines; a line the parser rejects is skipped, and lines
    none of which parse are garbage."""
    try:
        return exposition.samples(lines)
    except exposition.NotExposition as exc:
        raise ScrapeError(str(exc)) from None


def _check_exposition(text: str) -> None:
    """ScrapeError unless one of the first lines of ``text`` is a Prometheus sample (it answered, but not with
    DCGM)."""
    try:
        exposition.check_exposition(text)
    except exposition.NotExposition as exc:
        raise ScrapeError(str(exc)) from None


def _parse(text: str, now_ns: int, hostname: str | None) -> tuple[list[SampleRow], dict[int, DcgmDevice], int]:
    """Rows, devices, and how many DCGM series the text held (sentinels and unlabelled ones included)."""
    best: dict[tuple[int, str], tuple[int, float]] = {}
    devices: dict[int, DcgmDevice] = {}
    lines, series, other = _select(text)
    if series == 0 and other:
        _check_exposition(text)
    if len(lines) > MAX_SERIES:
        raise ScrapeError(f"more than {MAX_SERIES:,} DCGM series in one scrape (is it one node's dcgm-exporter?)")
    for name, raw_labels, raw_value in _samples(lines):
        field = field_of(name)
        labels = {k.lower(): v for k, v in raw_labels.items()}
        device = device_of(labels)
        if device is None or (hostname is not None and device.hostname not in (None, hostname)):
            continue
        devices.setdefault(device.gpu, device)
        value = field_value(raw_value, field) if field is not None else None
        if field is None or value is None:
            continue
        key = (device.gpu, field.metric)
        if key not in best or field.rank < best[key][0]:
            best[key] = (field.rank, value)
    rows = [(now_ns, DCGM, gpu, NO_PID, metric, value) for (gpu, metric), (_rank, value) in best.items()]
    return rows, devices, series


