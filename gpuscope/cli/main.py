"""The `gpuscope` command: one module per subcommand, each registering itself on the app."""

from __future__ import annotations

import sys

import typer

from gpuscope import __version__
from gpuscope.cli import analyze, attach, dashboard, fleet, gate, prices, report, run, runs, show
from gpuscope.cli.common import UserError, fail
from gpuscope.store import StoreError
from gpuscope.traces import TraceError

app = typer.Typer(
    name="gpuscope",
    help="How busy your GPUs really were, what held them back, what it cost, and what to change.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for module in (analyze, runs, show, prices, attach, run, dashboard, fleet, report, gate):
    module.register(app)


def _version(value: bool) -> None:
    if value:
        print(f"gpuscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    """gpuscope: GPU utilization, bottlenecks, cost and advice for ML jobs."""


def main() -> None:
    try:
        app(standalone_mode=True)
    except (UserError, TraceError, StoreError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        print("gpuscope: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
