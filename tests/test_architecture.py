"""docs/architecture.md agrees with the code: its generated part (packages, what each holds, imports, rules) is what
the code gives now, and every module, function, command and arrow its flows name is there.

    PYTHONPATH=. python -m tests.test_architecture     # rewrite the generated part after moving code
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests import architecture as arch
from tests.test_layers import ALLOWED


def test_the_architecture_page_agrees_with_the_code() -> None:
    found = arch.problems(arch.DOC.read_text(), ALLOWED)
    assert found == [], "\n".join(found)


def test_every_package_says_what_it_holds() -> None:
    assert [p for p in arch.packages() if not arch.summary(p)] == []


def test_the_packages_and_imports_are_read_from_the_source() -> None:
    names = arch.packages()
    assert {"model", "store", "traces", "analyzers", "cli", "format"} <= set(names)
    assert "data" not in names, "a folder without Python is no package"
    assert arch.package_imports("model") == set()
    assert {"model", "store"} <= arch.package_imports("collectors")
    assert "pynvml" in arch.third_party("collectors") and "pynvml" not in arch.third_party("analyzers")


def test_imports_for_type_checking_only_are_left_out(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuscope.store import Store\n"
                      "def f():\n    from gpuscope.traces import load\n")
    assert arch.runtime_imports(source) >= {"gpuscope.traces", "gpuscope.traces.load"}
    assert not {"gpuscope.store", "gpuscope.store.Store"} & arch.runtime_imports(source)


def test_a_stale_graph_is_caught_with_the_command_that_fixes_it() -> None:
    doc = arch.DOC.read_text()
    stale = arch.with_generated(doc, arch.generated_part(doc).replace("model", "modle", 1))  # type: ignore[union-attr]
    assert arch.problems(stale, ALLOWED) == [
        f"the generated part of docs/architecture.md is stale: run `{arch.REGENERATE}`"]
    assert arch.problems(arch.with_generated(doc, "\n"), ALLOWED)


def test_a_package_missing_from_the_rules_is_shown_not_ruled() -> None:
    fewer = {k: v for k, v in ALLOWED.items() if k != "store"}
    row = next(line for line in arch.generated(fewer).splitlines() if line.startswith("| `gpuscope/store/`"))
    assert row.split(" | ")[3] == arch.NOT_RULED
    assert "store --> model" not in arch.generated(fewer) and "store -.-> model" in arch.generated(fewer)


def test_an_import_past_the_rule_is_marked() -> None:
    strict = {**ALLOWED, "collectors": {"model"}}
    assert "**store (breaks the rule)**" in arch.generated(strict)


@pytest.mark.parametrize(("wrong", "why"), [
    ("`gpuscope.api.analysis.analyze_paths`", "gpuscope.api.analysis.analyze_paths does not exist in the code"),
    ("`gpuscope/api/analysys.py`", "gpuscope/api/analysys.py does not exist in the code"),
    ("`gpuscope.analyzer.report`", "gpuscope.analyzer.report does not exist in the code"),
    ("`gpuscope analyse PATH`", "`gpuscope analyse` is not a command"),
])
def test_a_name_that_is_not_in_the_code_is_caught(wrong: str, why: str) -> None:
    doc = arch.DOC.read_text() + f"\nThe flow goes through {wrong}.\n"
    assert arch.problems(doc, ALLOWED) == [why]


def test_a_diagram_naming_a_missing_function_is_caught() -> None:
    doc = arch.DOC.read_text().replace('"gpuscope.store.Store.save_report"', '"gpuscope.store.Store.save_reports"')
    assert arch.problems(doc, ALLOWED) == ["gpuscope.store.Store.save_reports does not exist in the code"]


@pytest.mark.parametrize(("a", "b", "why"), [
    ("gpuscope.analyzers.report.build_report", "gpuscope.store.new_run_id",
     "gpuscope.analyzers.report does not import gpuscope.store"),
    ("gpuscope.cli.show.show", "gpuscope.store.Store.add_samples", "does not call or use"),
    ("gpuscope.cli.analyze.analyze", "gpuscope.analyzers.report.build_report",
     "gpuscope.cli.analyze does not import gpuscope.analyzers.report"),
])
def test_an_arrow_that_is_no_import_or_call_is_caught(a: str, b: str, why: str) -> None:
    doc = arch.DOC.read_text() + f'\n```mermaid\nflowchart LR\n  x["{a}"] --> y["{b}"]\n```\n'
    (problem,) = arch.problems(doc, ALLOWED)
    assert problem.startswith(f"{a} --> {b}: ") and why in problem


def test_arrows_are_real_imports_and_calls() -> None:
    assert arch.arrow_problem("gpuscope.cli.analyze.analyze", "gpuscope.api.analysis.analyze_path") is None
    # through a function of its own module: analyze_path -> _analyze_read -> store.save_staged_run
    assert arch.arrow_problem("gpuscope.api.analysis.analyze_path", "gpuscope.store.Store.save_staged_run") is None
    assert arch.arrow_problem("gpuscope/dashboards/", "gpuscope/store/") is None


def main() -> int:
    doc = arch.DOC.read_text()
    if arch.generated_part(doc) is None:
        print(f"{arch.DOC} has no {arch.BEGIN} ... {arch.END} part", file=sys.stderr)
        return 1
    arch.DOC.write_text(arch.with_generated(doc, arch.generated(ALLOWED)))
    left = [p for p in arch.problems(arch.DOC.read_text(), ALLOWED) if "stale" not in p]
    print(f"wrote {arch.DOC.relative_to(arch.ROOT)}", *left, sep="\n", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
