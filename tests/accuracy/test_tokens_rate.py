"""Independent check of tokens a second: the live and the fleet answers against the obvious formula over the raw
counter samples (``tests.serving.paths.by_hand``: per series, last minus first with each restart handled by hand,
then the sum, over the seconds scraped), on servers made up in code with a seeded random generator.

Each case is one server: 1 to 4 engines (series), each at its own rate, some counting since long before the window
and some from 0, restarting 0 to 2 times (15.5 s and 35.5 s in: each process has counted for three steps or more
when it restarts), scraped every second for a minute with 5% of the scrapes missed and, on an engine that does not
restart, 2% of its readings NaN, negative or infinite. The fleet sees what Prometheus would answer of the same
samples over steps of 5 s. Both answers must equal the formula's.

What the fleet cannot see, and this check leaves out: a process that restarts under a step after it started, and
climbs back past its last reading within the step after (``tests/serving/test_counters.py`` bounds that miss)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuscope.model.fleet import FleetWindow
from tests.serving.paths import Scrape, by_hand, fleet, live

CASES = 40
SCRAPE_S, WINDOW_S, STEP_S = 1.0, 60.0, 5.0
START_S = 1_800_000_000.0


def server(seed: int) -> list[Scrape]:
    rng = np.random.default_rng(seed)
    engines = int(rng.integers(1, 5))
    times = START_S + np.arange(0, WINDOW_S + SCRAPE_S / 2, SCRAPE_S)
    series: dict[str, list[float | None]] = {}
    for e in range(engines):
        rate = float(rng.uniform(50, 2000))
        value = float(rng.choice([0.0, rng.uniform(1e5, 1e8)]))
        restarts = sorted(rng.choice(np.arange(15, WINDOW_S - 5, 20), size=int(rng.integers(0, 3)), replace=False))
        values: list[float | None] = []
        for i, t in enumerate(times - START_S):
            grown = value + rate * t if not restarts else None
            if restarts:  # from 0 after each restart, at its own moment between two scrapes
                since = [r + 0.5 for r in restarts if r + 0.5 <= t]
                grown = (rate * (t - since[-1])) if since else value + rate * t
            bad = not restarts and 0 < i < len(times) - 1 and rng.random() < 0.02
            values.append(float(rng.choice([math.nan, -1.0, math.inf])) if bad else grown)
        series[str(e)] = values
    missed = rng.random(len(times)) < 0.05
    missed[0] = missed[-1] = False
    return [Scrape(t_s=float(t), counters={e: v[i] for e, v in series.items()}, missed=bool(missed[i]))
            for i, t in enumerate(times)]


WINDOW = FleetWindow(start_ns=round(START_S * 1e9), step_ns=round(STEP_S * 1e9), buckets=round(WINDOW_S / STEP_S))


@pytest.mark.parametrize("seed", range(CASES))
def test_live_and_fleet_tokens_a_second_equal_the_formula_over_the_raw_samples(seed: int) -> None:
    scrapes = server(seed)
    expected = by_hand(scrapes)
    live_m, fleet_m = live(scrapes), fleet(scrapes, WINDOW)
    assert live_m is not None
    assert live_m.output_tokens_per_s == pytest.approx(expected, rel=1e-9)
    assert fleet_m.output_tokens_per_s == pytest.approx(expected, rel=1e-9)
