"""An inference server's own metrics endpoint (Prometheus text): vLLM, SGLang and Hugging Face TGI, scraped once a
tick and recorded in engine-neutral names (``model.serving_names`` maps each engine's names to them).

Several series of one name (data-parallel engines, models) are summed; the KV-cache share is their mean. Histograms
are kept as Prometheus keeps them, cumulative buckets by bound with their sum and count, so percentiles are taken
later over any window. A failed scrape is a gap, never an error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from gpuscope.collectors import exposition
from gpuscope.collectors.dcgm import normalize_url
from gpuscope.model.schema import NO_GPU, NO_PID, SERVING, SampleRow
from gpuscope.model.serving import Engine
from gpuscope.model.serving_names import ENGINE_METRICS, EngineMetric, MetricKind
from gpuscope.net.http import Deadline, FetchError, endpoint, fetch, request

_MAX_BODY_BYTES = 16 * 2**20


class ServingScrapeError(Exception):
    """A scrape gave nothing usable; the message is one line."""


def bucket_metric(histogram: str, le: float) -> str:
    """The row name of one cumulative bucket: ``serving.ttft_s.le=0.5``, ``...le=+Inf``."""
    return f"{histogram}.le={'+Inf' if math.isinf(le) else repr(float(le))}"


def parse_serving(text: str, now_ns: int) -> tuple[list[SampleRow], Engine | None]:
    """Rows (at ``now_ns``) of a server's scrape in engine-neutral names, and the engine whose names it spoke;
    ServingScrapeError when the text is not Prometheus exposition."""
    samples = _samples(text)
    present: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in samples:
        present.setdefault(name, []).append((labels, value))
    rows: list[SampleRow] = []
    engines: list[Engine] = []  # the engine whose names most figures came in
    for spec in ENGINE_METRICS:
        found = _first_present(spec, present)
        if found is None:
            continue
        engine, values = found
        engines.append(engine)
        rows.extend((now_ns, SERVING, NO_GPU, NO_PID, metric, value) for metric, value in _rows(spec, values))
    return rows, (Counter(engines).most_common(1)[0][0] if engines else None)


def _first_present(spec: EngineMetric, present: dict[str, list[tuple[dict[str, str], float]]]
                   ) -> tuple[Engine, list[tuple[str, dict[str, str], float]]] | None:
    """The first of the spec's names the scrape holds, with its series (a histogram's bucket, sum, count)."""
    for name, engine in spec.names:
        if spec.kind != "histogram":
            if name in present:
                return engine, [(name, labels, value) for labels, value in present[name]]
            continue
        parts = [(suffix, labels, value) for suffix in ("_bucket", "_sum", "_count")
                 for labels, value in present.get(name + suffix, [])]
        if parts:
            return engine, parts
    return None


def _rows(spec: EngineMetric, values: list[tuple[str, dict[str, str], float]]) -> list[tuple[str, float]]:
    finite = [(name, labels, v) for name, labels, v in values if math.isfinite(v) and v >= 0]
    if not finite:
        return []
    if spec.kind != "histogram":
        numbers = [v for _, _, v in finite]
        total = sum(numbers) / len(numbers) if spec.aggregate == "mean" else sum(numbers)
        return [(spec.metric, total)]
    sums: dict[str, float] = {}
    for part, labels, value in finite:
        if part == "_bucket":
            try:
                le = float(labels.get("le", "nan"))
            except ValueError:
                continue
            if math.isnan(le):
                continue
            key = bucket_metric(spec.metric, le)
        else:
            key = f"{spec.metric}.{part.removeprefix('_')}"
        sums[key] = sums.get(key, 0.0) + value
    return sorted(sums.items())


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line; a line the parser rejects is skipped, and text no line of
    which parses is not exposition."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    try:
        found = exposition.samples(lines)
    except exposition.NotExposition as exc:
        raise ServingScrapeError(str(exc)) from None
    return [(name, labels, exposition.as_float(value)) for name, labels, value in found]


class ServingSampler:
    """Scrapes an inference server's metrics endpoint once per tick; a failed scrape is a gap, never an error."""

    name = SERVING

    def __init__(self, url: str, *, timeout_s: float = 0.5) -> None:
        """``url``: "host:8000" means http://host:8000/metrics; a user and password in it are sent as basic auth
        and never shown."""
        self._target = endpoint(normalize_url(url, keep_credentials=True))
        self.timeout_s = timeout_s
        self.gaps = 0
        self.last_error: str | None = None
        self.engine: Engine | None = None
        """Whose names the last good scrape spoke."""

    @property
    def url(self) -> str:
        """The endpoint as it may be shown: without credentials."""
        return self._target.shown

    @staticmethod
    def probe(url: str, timeout_s: float = 0.5) -> str | None:
        """One scrape now: None when it gives serving metrics, else one line saying what is wrong."""
        target = endpoint(normalize_url(url, keep_credentials=True))
        try:
            rows, _engine = parse_serving(_fetch(target.url, target.authorization, timeout_s), 0)
        except ServingScrapeError as exc:
            return f"serving metrics endpoint {target.shown}: {exc}"
        if not rows:
            return (f"serving metrics endpoint {target.shown}: answered, but with no vLLM, SGLang or TGI metric "
                    f"(is it the server's /metrics? SGLang needs --enable-metrics)")
        return None

    def sample(self, now_ns: int) -> list[SampleRow]:
        try:
            rows, engine = parse_serving(_fetch(self._target.url, self._target.authorization, self.timeout_s),
                                         now_ns)
        except ServingScrapeError as exc:
            self.gaps += 1
            self.last_error = str(exc)
            return []
        if engine is not None:
            self.engine = engine
        return rows

    def close(self) -> None:
        """Nothing to release: every scrape opens and closes its own connection."""


def _fetch(url: str, authorization: str | None, timeout_s: float) -> str:
    try:
        answer = fetch(request(url, authorization=authorization), deadline=Deadline(timeout_s),
                       max_bytes=_MAX_BODY_BYTES, proxies=False)
    except FetchError as exc:
        raise ServingScrapeError(str(exc)) from None
    return answer.body.decode("utf-8", errors="replace")


def metric_names(kind: MetricKind | None = None) -> Sequence[EngineMetric]:
    """The figures read (of one kind, when given)."""
    return [m for m in ENGINE_METRICS if kind is None or m.kind == kind]
