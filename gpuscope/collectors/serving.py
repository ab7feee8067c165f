"""An inference server's own metrics endpoint (Prometheus text): vLLM, SGLang and Hugging Face TGI, scraped once a
tick and recorded in engine-neutral names (``model.serving_names`` maps each engine's names to them).

Counters and latency histograms are recorded series by series (``model.schema.SERVING_SERIES``): several engines
of one server restart apart, so each series' increase is taken on its own before they are added up
(``analyzers.serving.counters``). Gauges of several series are summed (the KV-cache share averaged) as they are read.
Histograms are kept as Prometheus keeps them, cumulative buckets by bound with their sum and count, so percentiles
are taken later over any window.

Bounded work: only the lines of the metrics read are picked out of the text (by name, before any is parsed); a
figure with more than ``MAX_SERIES`` series, or a histogram series with more than ``MAX_BUCKETS`` buckets, is left
out of that scrape; the parse shares the scrape's time limit with the request, and the figures still unread when it
passes are left out of that scrape (their series have a gap, which only lengthens the interval of their next
increase). A series, bucket or value that cannot be read is skipped and counted; ``ServingSampler.warnings`` says
what, in one line per metric. A failed scrape is a gap, never an error.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpuscope.collectors import exposition
from gpuscope.collectors.dcgm import normalize_url
from gpuscope.model.redact import about
from gpuscope.model.schema import NO_GPU, NO_PID, SERVING, SampleRow, serving_row
from gpuscope.model.serving import Engine
from gpuscope.model.serving_names import ENGINE_METRICS, EngineMetric, MetricKind, bucket_bound, shown_label
from gpuscope.net.http import Deadline, FetchError, endpoint, fetch, request

_MAX_BODY_BYTES = 16 * 2**20
MAX_SERIES = 32
"""The most series (label sets: engines, models) of one figure a scrape may hold; past it the figure is left out of
that scrape (one server's endpoint has a few: a vLLM data-parallel rank is one)."""
MAX_BUCKETS = 64
"""The most buckets one histogram series may have (vLLM's have up to about 20)."""
MAX_WARNINGS = 10
"""Metrics named in the skipped-series warnings; more are counted in one line."""
_PARTS = ("_bucket", "_sum", "_count")
_NOT_A_COUNT = "a value that is not a count (NaN, infinite or negative)"


class ServingScrapeError(Exception):
    """A scrape gave nothing usable; the message is one line."""


@dataclass(frozen=True)
class ServingScrape:
    """What one scrape gave: rows (engine-neutral names), the engine whose names it spoke, and what it left out."""

    rows: list[SampleRow]
    engine: Engine | None
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(the server's metric name, why) -> series or values skipped."""
    cut: tuple[str, ...] = ()
    """Figures not read because the scrape's time ran out first."""


def bucket_metric(histogram: str, le: float) -> str:
    """The row name of one cumulative bucket: ``serving.ttft_s.le=0.5``, ``...le=+Inf``."""
    return f"{histogram}.le={'+Inf' if math.isinf(le) else repr(float(le))}"


def series_key(name: str, labels: dict[str, str]) -> str:
    """A series' short name: a hash of its metric and labels (``le`` aside, so a histogram's parts share it)."""
    text = "\0".join([name, *(f"{k}={v}" for k, v in sorted(labels.items()) if k != "le")])
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=6).hexdigest()


def parse_serving(text: str, now_ns: int, deadline: Deadline | None = None) -> ServingScrape:
    """Rows (at ``now_ns``) of a server's scrape in engine-neutral names, the engine whose names it spoke, and what
    was left out; ServingScrapeError when the text is not Prometheus exposition. Figures still unread when
    ``deadline`` passes are left out."""
    lines, skipped = _select(text)
    if not lines and not skipped:
        try:
            exposition.check_exposition(text)
        except exposition.NotExposition as exc:
            raise ServingScrapeError(str(exc)) from None
    rows: list[SampleRow] = []
    engines: list[Engine] = []  # the engine whose names most figures came in
    cut: list[str] = []
    for spec in ENGINE_METRICS:
        found = _first_present(spec, lines)
        if found is None:
            continue
        if deadline is not None and deadline.expired:
            cut.append(spec.metric)
            continue
        engine, name, mine = found
        values, rejected = exposition.read(mine)
        if rejected:
            skipped[(name, "a line the Prometheus parser rejects")] += rejected
        engines.append(engine)
        figure = _histogram_rows if spec.kind == "histogram" else _counter_rows if spec.kind == "counter" \
            else _gauge_rows
        for metric, value in figure(spec, name, values, skipped):
            rows.append((now_ns, SERVING, NO_GPU, NO_PID, metric, value))
    return ServingScrape(rows=rows, engine=Counter(engines).most_common(1)[0][0] if engines else None,
                         skipped=skipped, cut=tuple(cut))


def _names() -> dict[str, tuple[EngineMetric, str]]:
    """Every name a scrape's line may start with -> its figure and the engine's base name."""
    out: dict[str, tuple[EngineMetric, str]] = {}
    for spec in ENGINE_METRICS:
        for name, _engine in spec.names:
            for part in _PARTS if spec.kind == "histogram" else ("",):
                out[name + part] = (spec, name)
    return out


_BY_NAME = _names()


def _select(text: str) -> tuple[dict[str, list[str]], Counter[tuple[str, str]]]:
    """The lines of the metrics read, by their base name; a name with more lines than its figure may have is left
    out and counted; ServingScrapeError past ``MAX_LINES`` lines in all (the scan stops there)."""
    lines: dict[str, list[str]] = {}
    over: set[str] = set()
    for n, (name, line) in enumerate(exposition.named_lines(text, _BY_NAME)):
        if n >= MAX_LINES:
            raise ServingScrapeError(f"more than {MAX_LINES:,} lines of serving metrics in one scrape, so it was left "
                                     f"out (is it one server's endpoint?)")
        spec, base = _BY_NAME[name]
        if base in over:
            continue
        kept = lines.setdefault(base, [])
        kept.append(line)
        if len(kept) > _most_lines(spec):
            over.add(base)
    skipped: Counter[tuple[str, str]] = Counter()
    for base in over:
        del lines[base]
        skipped[(base, f"more than {MAX_SERIES} series in one scrape, so the figure was left out of it (is it "
                       f"one server's endpoint?)")] += 1
    return lines, skipped


def _most_lines(spec: EngineMetric) -> int:
    """The most lines one figure may have: its series, and for a histogram each one's buckets, sum and count."""
    return MAX_SERIES * ((MAX_BUCKETS + 2) if spec.kind == "histogram" else 1)


MAX_LINES = sum(_most_lines(spec) for spec in ENGINE_METRICS)
"""The most lines of serving metrics one scrape may hold (every figure at its cap: 6,496); past it the scan stops and
the scrape is a gap, so a scrape's work stays bounded whatever the server sends."""


def _first_present(spec: EngineMetric, lines: dict[str, list[str]]) -> tuple[Engine, str, list[str]] | None:
    """The first of the spec's names the scrape holds, its engine and its lines."""
    return next(((engine, name, lines[name]) for name, engine in spec.names if name in lines), None)


def _readable(value: float) -> float | None:
    number = exposition.as_float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _counter_rows(spec: EngineMetric, name: str, values: list[exposition.Sample],
                  skipped: Counter[tuple[str, str]]) -> list[tuple[str, float]]:
    out: dict[str, float] = {}
    for _, labels, raw in values:
        value, key = _readable(raw), series_key(name, labels)
        if value is None:
            skipped[(name, _NOT_A_COUNT)] += 1
        elif key in out:
            skipped[(name, "a series given twice")] += 1
        else:
            out[key] = value
    return [(serving_row(spec.metric, key), value) for key, value in out.items()]


def _gauge_rows(spec: EngineMetric, name: str, values: list[exposition.Sample],
                skipped: Counter[tuple[str, str]]) -> list[tuple[str, float]]:
    numbers = [v for v in (_readable(raw) for _, _, raw in values) if v is not None]
    if len(numbers) < len(values):
        skipped[(name, "a value that is not a number (NaN, infinite or negative)")] += len(values) - len(numbers)
    if not numbers:
        return []
    return [(spec.metric, sum(numbers) / len(numbers) if spec.aggregate == "mean" else sum(numbers))]


def _histogram_rows(spec: EngineMetric, name: str, values: list[exposition.Sample],
                    skipped: Counter[tuple[str, str]]) -> list[tuple[str, float]]:
    """Each series' buckets, sum and count; a series with a bucket whose bound cannot be read, a bound given twice
    or too many buckets is left out whole (its percentiles would be anyone's guess)."""
    series: dict[str, dict[str, float | None]] = {}
    broken: dict[str, str] = {}
    for sample_name, labels, raw in values:
        key = series_key(name, labels)
        part = sample_name.removeprefix(name)
        if part == "_bucket":
            bound = bucket_bound(labels.get("le", ""))
            if bound is None or bound == -math.inf:
                le = shown_label(labels.get("le", ""))
                broken[key] = f'a series with a bucket whose bound le="{le}" is not a number'
                continue
            row = bucket_metric(spec.metric, bound)
        else:
            row = f"{spec.metric}.{part.removeprefix('_')}"
        found = series.setdefault(key, {})
        if row in found:
            broken[key] = "a series with a bucket bound given twice"
        found[row] = _readable(raw)
    out: list[tuple[str, float]] = []
    for key, parts in series.items():
        if key not in broken and sum(1 for row in parts if ".le=" in row) > MAX_BUCKETS:
            broken[key] = f"a series with more than {MAX_BUCKETS} buckets"
        if key in broken:
            continue
        unread = [row for row, value in parts.items() if value is None]
        if unread:
            skipped[(name, _NOT_A_COUNT)] += len(unread)
        out.extend((serving_row(row, key), value) for row, value in parts.items() if value is not None)
    for why in broken.values():
        skipped[(name, why)] += 1
    return out


class ServingSampler:
    """Scrapes an inference server's metrics endpoint once per tick; a failed scrape is a gap, never an error."""

    name = SERVING

    def __init__(self, url: str, *, timeout_s: float = 0.5) -> None:
        """``url``: "host:8000" means http://host:8000/metrics; a user and password in it are sent as basic auth
        and never shown. ``timeout_s`` bounds each scrape, its request and its parse together."""
        self._target = endpoint(normalize_url(url, keep_credentials=True))
        self.timeout_s = timeout_s
        self.gaps = 0
        self.last_error: str | None = None
        self.engine: Engine | None = None
        """Whose names the last good scrape spoke."""
        self.skipped: Counter[tuple[str, str]] = Counter()
        """What the scrapes left out: (the server's metric name, why) -> how many, over the run."""
        self.cut: Counter[str] = Counter()
        """Figures left out of a scrape because its time ran out, by figure -> scrapes."""

    @property
    def url(self) -> str:
        """The endpoint as it may be shown: without credentials."""
        return self._target.shown

    @staticmethod
    def probe(url: str, timeout_s: float = 0.5) -> str | None:
        """One scrape now: None when it gives serving metrics, else one line saying what is wrong."""
        target = endpoint(normalize_url(url, keep_credentials=True))
        where = f"serving metrics endpoint {target.shown}"
        try:
            scrape = parse_serving(_fetch(target.url, target.authorization, Deadline(timeout_s)), 0)
        except ServingScrapeError as exc:
            return about(where, str(exc))
        if not scrape.rows:
            return about(where, "answered, but with no vLLM, SGLang or TGI metric (is it the server's /metrics? "
                                "SGLang needs --enable-metrics)")
        return None

    def sample(self, now_ns: int) -> list[SampleRow]:
        deadline = Deadline(self.timeout_s)
        try:
            scrape = parse_serving(_fetch(self._target.url, self._target.authorization, deadline), now_ns, deadline)
        except ServingScrapeError as exc:
            self.gaps += 1
            self.last_error = str(exc)
            return []
        self.skipped.update(scrape.skipped)
        self.cut.update(scrape.cut)
        if scrape.engine is not None:
            self.engine = scrape.engine
        return scrape.rows

    def warnings(self) -> tuple[str, ...]:
        """What the recording's scrapes left out, one line each: the failed scrapes, the figures cut at the time
        limit, and per metric the series and values that could not be read."""
        where = f"serving metrics at {self.url}"
        out: list[str] = []
        if self.gaps:
            out.append(about(where, f"{self.gaps} scrape{'s' if self.gaps > 1 else ''} gave nothing (the last: "
                                    f"{self.last_error}); its rates cover the scrapes that answered"))
        if self.cut:
            figures = ", ".join(f"{m} ({n})" for m, n in sorted(self.cut.items()))
            out.append(about(where, f"a scrape's parse outran its {self.timeout_s:g} s limit, so these figures were "
                                    f"left out of that many scrapes: {figures}; a gap only lengthens the interval "
                                    f"of a counter's next increase (a smaller /metrics, or a longer --interval, "
                                    f"avoids it)"))
        by_name: dict[str, list[str]] = {}
        for (name, why), n in sorted(self.skipped.items()):
            by_name.setdefault(name, []).append(f"{n} time{'s' if n > 1 else ''}, {why}")
        for name, whys in list(by_name.items())[:MAX_WARNINGS]:
            out.append(about(where, f"{name}: skipped {'; '.join(whys)}; the rest is reported (check what the "
                                    f"server exports there)"))
        if len(by_name) > MAX_WARNINGS:
            out.append(about(where, f"{len(by_name) - MAX_WARNINGS} more metrics had series skipped"))
        return tuple(out)

    def close(self) -> None:
        """Nothing to release: every scrape opens and closes its own connection."""


def _fetch(url: str, authorization: str | None, deadline: Deadline) -> str:
    try:
        answer = fetch(request(url, authorization=authorization), deadline=deadline, max_bytes=_MAX_BODY_BYTES,
                       proxies=False)
    except FetchError as exc:
        raise ServingScrapeError(str(exc)) from None
    return answer.body.decode("utf-8", errors="replace")


def metric_names(kind: MetricKind | None = None) -> Sequence[EngineMetric]:
    """The figures read (of one kind, when given)."""
    return [m for m in ENGINE_METRICS if kind is None or m.kind == kind]
