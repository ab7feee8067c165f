"""The gate's settings: a threshold per metric, the significance level, what a weak test does; read from TOML.

    # gpuscope-gate.toml (every key optional)
    alpha = 0.01            # significance level of the one-sided permutation test over the steps
    min_steps = 5           # fewer steady steps on either side: the test is weak
    weak = "pass"           # a change past its threshold that the steps cannot confirm: "pass" (reported) or "fail"
    benchmark_prefix = "gpuscope"

    [metrics.step_time]
    threshold = 0.10        # relative: +10% median step time
    [metrics.gpu_busy]
    enabled = false
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Literal

import msgspec

MetricKey = Literal["step_time", "gpu_busy", "cost_per_1k_steps", "exposed_comm_share", "data_loading_share",
                    "peak_memory", "new_bottleneck"]

METRIC_KEYS: tuple[MetricKey, ...] = ("step_time", "gpu_busy", "cost_per_1k_steps", "exposed_comm_share",
                                      "data_loading_share", "peak_memory", "new_bottleneck")

DEFAULT_THRESHOLDS: dict[MetricKey, float] = {
    "step_time": 0.10,            # relative; TorchBench flags 7%, CodSpeed 10%: runs of one job differ by 5-15%
    "gpu_busy": 0.05,             # percentage points of the step, down
    "cost_per_1k_steps": 0.10,    # relative
    "exposed_comm_share": 0.05,   # points, up
    "data_loading_share": 0.05,   # points, up
    "peak_memory": 0.10,          # relative; allocator peaks repeat closely between runs of one job
    "new_bottleneck": 0.05,       # points the new primary stage's share must have grown by
}

DEFAULT_CONFIG_NAME = "gpuscope-gate.toml"
DEFAULT_ALPHA = 0.01
"""A gate runs on every pull request: at 1% per metric, resampled A/A runs of real jobs fail under 1% of the time
(benchmarks/gate_false_alarms.py, docs/ci.md)."""

Share = Annotated[float, msgspec.Meta(ge=0.0)]


class ConfigError(Exception):
    """A gate configuration that cannot be used; one line."""


class MetricConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    threshold: Share
    enabled: bool = True


class _MetricOverride(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    threshold: Share | None = None
    enabled: bool | None = None


class _ConfigFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    alpha: Annotated[float, msgspec.Meta(gt=0.0, lt=1.0)] = DEFAULT_ALPHA
    min_steps: Annotated[int, msgspec.Meta(ge=2)] = 5
    weak: Literal["pass", "fail"] = "pass"
    benchmark_prefix: str = "gpuscope"
    metrics: dict[MetricKey, _MetricOverride] = {}


class GateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of one gate run. ``metrics`` holds every metric key."""

    alpha: float = DEFAULT_ALPHA
    min_steps: int = 5
    weak: Literal["pass", "fail"] = "pass"
    """A change past its threshold with too few steps to test: reported and passed, or failed."""
    benchmark_prefix: str = "gpuscope"
    metrics: dict[MetricKey, MetricConfig] = msgspec.field(
        default_factory=lambda: {k: MetricConfig(threshold=v) for k, v in DEFAULT_THRESHOLDS.items()})

    def metric(self, key: MetricKey) -> MetricConfig:
        return self.metrics[key]


def parse_config(text: str, *, source: str = "config") -> GateConfig:
    """Defaults, overridden by the TOML document ``text``."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    try:
        given = msgspec.convert(raw, type=_ConfigFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    metrics = dict(GateConfig().metrics)
    for key, override in given.metrics.items():
        base = metrics[key]
        metrics[key] = MetricConfig(threshold=base.threshold if override.threshold is None else override.threshold,
                                    enabled=base.enabled if override.enabled is None else override.enabled)
    return GateConfig(alpha=given.alpha, min_steps=given.min_steps, weak=given.weak,
                      benchmark_prefix=given.benchmark_prefix, metrics=metrics)


def read_config(path: Path | None) -> GateConfig:
    """``path``'s settings; without a path, ``./gpuscope-gate.toml`` when it exists, else the defaults."""
    if path is None:
        default = Path(DEFAULT_CONFIG_NAME)
        if not default.is_file():
            return GateConfig()
        path = default
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    return parse_config(text, source=str(path))
