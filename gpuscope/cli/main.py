"""The `gpuscope` command: one module per subcommand, each registering itself on the app.

A command line that names its subcommand imports only that subcommand's module, so `gpuscope analyze` does
not pay for the live collectors, the dashboard or pandas. `gpuscope --help` (and `--version`, or no arguments)
imports none of them: the command list is drawn from ``COMMANDS``, whose one-line summaries
tests/cli/test_startup.py holds equal to each command's own. ``app`` (for in-process callers) has them all.
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import typer

from gpuscope import __version__

COMMANDS: dict[str, str] = {
    "analyze": "Analyse PyTorch profiler (Kineto) traces or Nsight Systems profiles: one file or a directory of ranks.",
    "ops": "Time per PyTorch operator (CPU and GPU, self and total), its kernels, calls and share of the steps; the "
           "FLOPs and roofline of each operator and kernel family, and the run's MFU.",
    "timeline": "Write each rank's slowest and median step (ProfilerStep, or a serving engine's step ranges) as a "
                "trace of that step alone; print the paths.",
    "runs": "List saved runs: id, name, kind, status, verdict, GPU busy, cost, started, samples.",
    "show": "Print a saved run's report.",
    "prices": "Show the GPU price catalog (with sources), the overrides in effect, and the price a GPU or run "
              "would get.",
    "attach": "Sample a running training or inference process live, then print its report.",
    "run": "Launch a command (a training script), sample it live, print its report, exit with its exit code.",
    "top": "Every GPU and GPU process on this node, like nvitop: utilisation, memory, power, and the cost running.",
    "dashboard": "Serve the web dashboard: every run, its verdict, cost and charts; live while a run records.",
    "fleet": "Which jobs hold GPUs and leave them idle, what that costs, and which GPUs could be shared or given "
             "back.",
    "report": "Write a report to forward: what the job cost, what of it bought nothing, why, and what to change.",
    "gate": "Compare a candidate run with a baseline; exit 1 on a significant regression.",
    "diff": "Explain and price the change from BASELINE to CANDIDATE: the step time's change split into stages that "
            "add up to it, the kernels and operators that changed, the set-up, and the price per step, job and "
            "month.",
    "hang": "Say which collective a hung job is stuck in and which ranks never joined it, from flight-recorder "
            "dumps.",
    "memory": "Say what filled the GPUs' memory at the peak, what it was made of, the room left and what to change.",
}
"""Each subcommand, in ``--help`` order, with its one-line summary; its code is the module of its name,
``gpuscope.cli.<name>``."""

HELP = "How busy your GPUs really were, what held them back, what it cost, and what to change."

_app = typer.Typer(
    name="gpuscope",
    help=HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_registered: list[str] = []


def _register(names: tuple[str, ...]) -> typer.Typer:
    from gpuscope.cli.guard import guard_all

    for name in names:
        if name not in _registered:
            importlib.import_module(f"gpuscope.cli.{name}").register(_app)
            _registered.append(name)
    guard_all(_app)  # the one place every command gets the internal-error guard
    return _app


def _listing() -> typer.Typer:
    """The app as `gpuscope --help` shows it: each command by name and summary, none of their modules imported.
    Only the top-level help, ``--version`` or a usage error can come of it: a command line naming a command
    registers that command's module instead."""
    listing = typer.Typer(name="gpuscope", help=HELP, no_args_is_help=True, add_completion=False,
                          pretty_exceptions_enable=False)
    listing.callback()(_root)
    for name, summary in COMMANDS.items():
        listing.command(name, help=summary)(_unregistered)
    return listing


def _unregistered() -> None:  # pragma: no cover - never reached: a named command is registered for real
    raise AssertionError("a command of the help listing ran")


def __getattr__(name: str) -> typer.Typer:
    if name == "app":
        return _register(tuple(COMMANDS))
    raise AttributeError(name)


def _version(value: bool) -> None:
    if value:
        print(f"gpuscope {__version__}")
        raise typer.Exit()


@_app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """gpuscope: GPU utilization, bottlenecks, cost and advice for ML jobs."""


def main() -> None:
    named = sys.argv[1] if len(sys.argv) > 1 else None
    try:
        app = _register((named,)) if named in COMMANDS else _listing()
        app(standalone_mode=True)
    except KeyboardInterrupt:
        print("gpuscope: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    except Exception as exc:
        _end(exc)


def _end(exc: Exception) -> NoReturn:
    """A command's failure as one line: a user's mistake exits 2, a fault of gpuscope's exits 3. The error
    classes are imported here, once something failed, so a start that ends well never loads them."""
    from gpuscope.api.errors import GpuscopeError
    from gpuscope.cli.common import fail
    from gpuscope.format import printable
    from gpuscope.model.errors import EXIT_INTERNAL, AnalysisError
    from gpuscope.model.redact import redact_text
    from gpuscope.store import StoreError
    from gpuscope.traces import TraceError

    if isinstance(exc, (GpuscopeError, TraceError, StoreError)):
        fail(str(exc))
    if isinstance(exc, AnalysisError):  # the input was read fine: ours to fix, and told apart from bad input
        # masked again as it is printed: an error made elsewhere (a worker, the API) may quote a secret
        print(f"gpuscope: internal error: {printable(redact_text(str(exc)))}", file=sys.stderr)
        raise SystemExit(EXIT_INTERNAL) from None
    raise exc
