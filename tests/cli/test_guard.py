"""Every command runs under the one guard `analyze` has: a failure of gpuscope's own (here, a function replaced by
one that raises, as a bug would) is one line, exit 3, naming what the command was given, the stage and the
gpuscope function it failed in; never a traceback. The real command line in a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuscope.cli.guard import subject
from gpuscope.cli.main import COMMANDS, app
from gpuscope.model.errors import EXIT_INTERNAL
from tests.cli.helpers import gpuscope, one_clean_error_line
from tests.conftest import SAMPLES

TRACE = next((SAMPLES / "resnet50_workers4").glob("*.json.gz"))
DLRM = SAMPLES / "dlrm_8rank"
HANG = SAMPLES / "gloo_4rank" / "hang" / "json"

# argv after the patch target: SELF stands for this process's pid (a live process to attach to).
INJECT = textwrap.dedent("""
    import importlib, os, sys
    from gpuscope.cli.main import main

    def broken(*args, **kwargs):
        raise KeyError(os.environ.get("BUG_MESSAGE", "boom"))

    where, *argv = sys.argv[1:]
    module, _, name = where.partition(":")
    owner = importlib.import_module(module)
    *path, last = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, last, broken)
    sys.argv = ["gpuscope", *(str(os.getpid()) if a == "SELF" else a for a in argv)]
    main()
""")
BUG = "KeyError: 'boom' in "
REPORT_IT = ("This is a bug in gpuscope, not in your data: please report it with this line, `gpuscope --version` and, "
             "if you can share it, the trace.")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the analysed trace."""
    folder = tmp_path_factory.mktemp("home")
    assert gpuscope("analyze", str(TRACE), home=folder).returncode == 0
    return folder


@pytest.fixture(scope="module")
def run_id(home: Path) -> str:
    listed = gpuscope("runs", "--json", home=home)
    return str(json.loads(listed.stdout)[0]["id"])


def broken_command(home: Path, where: str, *argv: str, message: str = "boom") -> str:
    """The one stderr line of ``gpuscope ARGV`` with ``where`` (module:attribute) raising KeyError(message)."""
    result = subprocess.run([sys.executable, "-c", INJECT, where, *argv], capture_output=True, text=True,
                            timeout=180, env={**os.environ, "GPUSCOPE_HOME": str(home), "COLUMNS": "200",
                                              "BUG_MESSAGE": message})
    line = one_clean_error_line(result)
    assert result.returncode == EXIT_INTERNAL, line
    assert line.endswith(REPORT_IT), line
    return line.removeprefix("gpuscope: internal error: ").removesuffix(" " + REPORT_IT)


def test_every_command_is_guarded_once() -> None:
    names = {info.name for info in app.registered_commands}
    assert names == set(COMMANDS)
    assert all(getattr(info.callback, "__gpuscope_guarded__", False) for info in app.registered_commands)


@pytest.mark.parametrize(("argv", "where", "said"), [
    (("ops", str(TRACE)), "gpuscope.analyzers.trace.ops:_aggregate",
     f"the operator table of {TRACE} failed ({BUG}gpuscope.analyzers.trace.ops.operator_table)."),
    (("timeline", str(TRACE), "-o", "{tmp}"), "gpuscope.analyzers.trace.step_pick:plan_steps",
     f"the choice of the slowest and median steps of {TRACE} failed "
     f"({BUG}gpuscope.analyzers.trace.step_pick.slowest_and_median)."),
    (("timeline", str(TRACE), "-o", "{tmp}"), "gpuscope.reports.timeline:step_trace",
     f"the step trace of {TRACE} failed ({BUG}gpuscope.reports.timeline.step_trace_bytes)."),
    (("diff", str(TRACE), str(TRACE)), "gpuscope.api.changes:explain",
     f"the comparison of {TRACE} and {TRACE} failed ({BUG}gpuscope.api.changes.diff)."),
    (("gate", str(DLRM), "--baseline", str(DLRM)), "gpuscope.cli.gate:compare",
     f"`gpuscope gate` of {DLRM} failed ({BUG}gpuscope.cli.gate.gate)."),
    (("hang", str(HANG)), "gpuscope.api.hang:find_hang",
     f"`gpuscope hang` of {HANG} failed ({BUG}gpuscope.api.hang.hang)."),
    (("runs",), "gpuscope.cli.runs:_table", f"`gpuscope runs` failed ({BUG}gpuscope.cli.runs.runs)."),
    (("prices",), "gpuscope.cli.prices:load_catalog", f"`gpuscope prices` failed ({BUG}gpuscope.cli.prices.prices)."),
    (("fleet", "--demo"), "gpuscope.cli.fleet:analyze_fleet",
     f"`gpuscope fleet` failed ({BUG}gpuscope.cli.fleet.fleet)."),
    (("top", "--once"), "gpuscope.collectors.node:NodeReader.open",
     f"`gpuscope top` failed ({BUG}gpuscope.cli.top.top)."),
    (("dashboard", "--port", "1"), "gpuscope.dashboards:create_app",
     f"`gpuscope dashboard` failed ({BUG}gpuscope.cli.dashboard.dashboard)."),
    (("attach", "SELF", "--duration", "1"), "gpuscope.api.recording:record_live",
     f"`gpuscope attach` of SELF failed ({BUG}gpuscope.cli.attach.record_live)."),
    (("run", "--", sys.executable, "-c", "pass"), "gpuscope.api.recording:record_live",
     f"`gpuscope run` failed ({BUG}gpuscope.cli.attach.record_live)."),
])
def test_a_bug_in_any_command_is_one_line_naming_what_where_and_the_stage(
        home: Path, tmp_path: Path, argv: tuple[str, ...], where: str, said: str) -> None:
    line = broken_command(home, where, *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    if "SELF" in said:  # the pid attached to, which only the command knew
        head, tail = said.split("SELF")
        assert line.startswith(head) and line.endswith(tail) and line[len(head):-len(tail)].isdigit(), line
    else:
        assert line == said


def test_a_saved_run_is_named_by_its_id(home: Path, run_id: str) -> None:
    assert broken_command(home, "gpuscope.reports.terminal:render", "show", run_id) == (
        f"`gpuscope show` of {run_id} failed ({BUG}gpuscope.cli.common.emit).")
    assert broken_command(home, "gpuscope.reports.html:render_html", "report", run_id, "-o", str(home / "r.html")) \
        == f"`gpuscope report` of {run_id} failed ({BUG}gpuscope.cli.report.report)."
    assert broken_command(home, "gpuscope.analyzers.trace.ops:_aggregate", "ops", run_id[:12]) == (
        f"the operator table of {TRACE} failed ({BUG}gpuscope.analyzers.trace.ops.operator_table).")


def test_what_a_command_was_given_is_named_without_credentials() -> None:
    arguments = ("target", "other", "command")
    given = {"target": "https://alice:S3cret@example.invalid/t.json?token=T0k", "other": "runs/x",
             "command": ["python", "train.py", "--password", "hunter2"], "json_out": True}
    assert subject(given, arguments) == "https://example.invalid/t.json and runs/x"
    assert subject({"target": None}, ("target",)) == ""


def test_a_secret_the_failure_quotes_is_masked_in_the_line(home: Path) -> None:
    """The exception's own text may quote what it was reading (a URL with its password and a signed query, a
    credential): the internal-error line masks them as every other line does (``gpuscope.model.redact``)."""
    url = "https://alice:S3cretPW@store.invalid/t.json?token=T0kenValue42&sig=Sig0123abc"
    result = subprocess.run([sys.executable, "-c", INJECT, "gpuscope.analyzers.trace.ops:_aggregate",
                             "ops", str(TRACE)], capture_output=True, text=True, timeout=180,
                            env={**os.environ, "GPUSCOPE_HOME": str(home), "COLUMNS": "200",
                                 "BUG_MESSAGE": f"cannot reach {url} with Bearer abcdef123456"})
    assert result.returncode == EXIT_INTERNAL
    for secret in ("S3cretPW", "T0kenValue42", "Sig0123abc", "abcdef123456", "alice"):
        assert secret not in result.stderr and secret not in result.stdout
    assert one_clean_error_line(result) == (
        f"gpuscope: internal error: the operator table of {TRACE} failed (KeyError: 'cannot reach "
        f"https://***@store.invalid/t.json?token=***&sig=*** with Bearer ***' in "
        f"gpuscope.analyzers.trace.ops.operator_table). {REPORT_IT}")


def test_user_errors_and_exit_codes_pass_through_the_guard(home: Path) -> None:
    missing = gpuscope("ops", str(home / "nothing-here"), home=home)
    assert missing.returncode == 2 and one_clean_error_line(missing).startswith("gpuscope: error: ")
    usage = gpuscope("ops", home=home)
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    assert gpuscope("runs", home=home).returncode == 0
