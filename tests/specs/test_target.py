"""The MFU target: --target-mfu over config.toml's [efficiency] target_mfu over the default, its checks, and the
price of the gap to it in analyze, show --reanalyze and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscope.specs import DEFAULT_TARGET_MFU, SpecError, resolve_target_mfu
from gpuscope.store import Store
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

RESNET = SAMPLES / "resnet50_dataloader_bound"


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text)


def test_the_command_line_wins_over_the_config_which_wins_over_the_default(tmp_path: Path) -> None:
    assert resolve_target_mfu(home=tmp_path).value == DEFAULT_TARGET_MFU == 0.4
    _config(tmp_path, "[efficiency]\ntarget_mfu = 0.55\n")
    got = resolve_target_mfu(home=tmp_path)
    assert got.value == 0.55 and str(tmp_path / "config.toml") in got.source
    got = resolve_target_mfu(0.3, home=tmp_path)
    assert got.value == 0.3 and got.source == "--target-mfu"


@pytest.mark.parametrize(("config", "cli", "words"), [
    ("", 40.0, "a percentage? 40% is 0.4"), ("", 0.0, "above 0 and at most 1"), ("", -0.2, "not -0.2"),
    ("", 1.5, "at most 1"), ('[efficiency]\ntarget_mfu = "0.5"\n', None, "target_mfu must be a fraction"),
    ("[efficiency]\ntarget_mfu = true\n", None, "not True"), ("[efficiency]\ntarget = 0.5\n", None,
                                                             "unknown setting 'target'"),
    ("efficiency = 3\n", None, "[efficiency] must be a table"),
])
def test_a_target_that_cannot_be_used_is_one_clear_error(tmp_path: Path, config: str, cli: float | None,
                                                         words: str) -> None:
    _config(tmp_path, config)
    with pytest.raises(SpecError, match=None) as caught:
        resolve_target_mfu(cli, home=tmp_path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def _gap(report: dict[str, object], target: float) -> float:
    """(1 - MFU / target) x the run's cost: the definition docs/cost.md and docs/efficiency.md give."""
    eff, cost = report["efficiency"], report["cost"]
    assert isinstance(eff, dict) and isinstance(cost, dict)
    return max(1 - eff["mfu"] / target, 0.0) * cost["total_usd"]


def test_analyze_show_and_report_price_the_gap_to_the_target_given(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _config(home, "[efficiency]\ntarget_mfu = 0.5\n")
    result = gpuscope("analyze", str(RESNET), "--json", home=home)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["cost"]["target_mfu"] == 0.5 and 0 < report["efficiency"]["mfu"] < 0.5
    assert report["cost"]["mfu_gap_usd"] == pytest.approx(_gap(report, 0.5))
    run_id = report["run"]["id"]
    again = json.loads(gpuscope("show", run_id, "--target-mfu", "0.8", "--json", home=home).stdout)  # re-analysed
    assert again["cost"]["target_mfu"] == 0.8 and again["efficiency"]["target_mfu_source"] == "--target-mfu"
    assert again["cost"]["mfu_gap_usd"] == pytest.approx(_gap(again, 0.8))
    assert again["cost"]["mfu_gap_usd"] > report["cost"]["mfu_gap_usd"]
    out = tmp_path / "r.html"
    assert gpuscope("report", run_id, "--target-mfu", "0.7", "-o", str(out), home=home).returncode == 0
    assert "70% (--target-mfu)" in out.read_text()


def test_a_bad_target_on_the_command_line_stops_before_anything_is_read(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for args in (("analyze", str(RESNET), "--target-mfu", "40"), ("report", str(RESNET), "--target-mfu", "2")):
        result = gpuscope(*args, home=home)
        assert result.returncode == 2 and result.stdout == ""
        assert "--target-mfu must be a fraction of peak" in one_clean_error_line(result)
    with Store(home) as store:
        assert store.list_runs() == []
