"""The `gpuscope` command: one module per subcommand, each registering itself on the app.

A command line that names its subcommand imports only that subcommand's module, so `gpuscope analyze` does
not pay for the live collectors, the dashboard or pandas; ``app`` (for ``--help`` and in-process callers)
has them all.
"""

from __future__ import annotations

import importlib
import sys

import typer

from gpuscope import __version__
from gpuscope.api.errors import GpuscopeError
from gpuscope.cli.common import fail
from gpuscope.cli.guard import guard_all
from gpuscope.format import printable
from gpuscope.model.errors import EXIT_INTERNAL, AnalysisError
from gpuscope.model.redact import redact_text
from gpuscope.store import StoreError
from gpuscope.traces import TraceError

COMMANDS = ("analyze", "ops", "timeline", "runs", "show", "prices", "attach", "run", "top", "dashboard", "fleet",
            "report", "gate", "diff", "hang", "memory")
"""Each subcommand is in the module of its name, ``gpuscope.cli.<name>``; listed in ``--help`` order."""

_app = typer.Typer(
    name="gpuscope",
    help="How busy your GPUs really were, what held them back, what it cost, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_registered: list[str] = []


def _register(names: tuple[str, ...]) -> typer.Typer:
    for name in names:
        if name not in _registered:
            importlib.import_module(f"gpuscope.cli.{name}").register(_app)
            _registered.append(name)
    guard_all(_app)  # the one place every command gets the internal-error guard
    return _app


def __getattr__(name: str) -> typer.Typer:
    if name == "app":
        return _register(COMMANDS)
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
        _register((named,) if named in COMMANDS else COMMANDS)(standalone_mode=True)
    except (GpuscopeError, TraceError, StoreError) as exc:
        fail(str(exc))
    except AnalysisError as exc:  # the input was read fine: ours to fix, and told apart from bad input
        # masked again as it is printed: an error made elsewhere (a worker, the API) may quote a secret
        print(f"gpuscope: internal error: {printable(redact_text(str(exc)))}", file=sys.stderr)
        raise SystemExit(EXIT_INTERNAL) from None
    except KeyboardInterrupt:
        print("gpuscope: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
