from __future__ import annotations

from functools import cache

import pytest

from gpuscope.model.report import Report
from tests.conftest import SAMPLES
from tests.gate.reports import analysed


@cache
def _sample(name: str) -> Report:
    return analysed(SAMPLES / name)


@pytest.fixture(scope="session")
def workers4() -> Report:
    return _sample("resnet50_workers4")


@pytest.fixture(scope="session")
def loader_bound() -> Report:
    return _sample("resnet50_dataloader_bound")


@pytest.fixture(scope="session")
def cpu_runs() -> tuple[Report, Report]:
    return _sample("cpu_mlp_aa/run_a"), _sample("cpu_mlp_aa/run_b")
