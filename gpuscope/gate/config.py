"""The gate's settings: a threshold per metric, the significance level, what a weak test does; read from TOML.

    # gpuscope-gate.toml (every key optional)
    alpha = 0.01            # significance level of the one-sided permutation test over the steps
    min_steps = 5           # fewer steady steps on either side: the test is weak
    weak = "fail"           # a change past its threshold, for the worse, that too few steps cannot test: "fail"
                            # ("profile at least N steady steps") or "pass" (reported only; `--allow-weak`)
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

Share = Annotated[float, msgspec.Meta(ge=0.0, le=100.0)]
"""A threshold: relative (0.10 is +10%) or in points of a share (at most 1); 100 is past any real one, and an
infinite threshold (TOML has `inf`) would turn a metric off without saying so: `enabled = false` does that."""
MAX_CONFIG_BYTES = 1 << 20
"""A gate's settings are a few lines: a larger file is not read."""


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
    min_steps: Annotated[int, msgspec.Meta(ge=2, le=1_000_000)] = 5
    weak: Literal["pass", "fail"] = "fail"
    benchmark_prefix: str = "gpuscope"
    metrics: dict[MetricKey, _MetricOverride] = {}


class GateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Settings of one gate run. ``metrics`` holds every metric key."""

    alpha: float = DEFAULT_ALPHA
    min_steps: int = 5
    weak: Literal["pass", "fail"] = "fail"
    """A change past its threshold, for the worse, with too few steps to test it: failed with "profile at least N
    steady steps" (the default: a gate that cannot test does not pass), or reported and passed (``--allow-weak``)."""
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
    except RecursionError:
        raise ConfigError(f"{source}: not valid TOML: arrays or tables nested too deeply") from None
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
    if path.exists() and not path.is_file():  # a named pipe would block the read, a device never end
        raise ConfigError(f"{path}: cannot be read: not a regular file")
    try:
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc.strerror if isinstance(exc, OSError) else exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: cannot be read: more than {MAX_CONFIG_BYTES // 1024} KiB, too large for settings")
    return parse_config(text, source=str(path))
