"""The one guard every subcommand runs under: a failure of gpuscope itself is an internal error, never a traceback.

A user's mistake is one line and exit 2 (``GpuscopeError``, ``TraceError``, ``StoreError``: the messages the
command and the library raise on purpose). Anything else a command raises is a bug of ours: it becomes an
``AnalysisError`` naming what the command was given (its arguments: the trace, the run, the two sides of a diff),
the stage (the command, unless a stage further in already named itself) and the gpuscope function that raised it;
``gpuscope.cli.main`` prints it as one line and exits 3. ``main.py`` wraps each command once, as it registers it,
so no command carries a copy of this.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, get_args, get_type_hints

import typer
from typer.models import ArgumentInfo

from gpuscope.api.errors import GpuscopeError
from gpuscope.model.errors import AnalysisError
from gpuscope.model.redact import bare_url, redact_text
from gpuscope.store.errors import StoreError
from gpuscope.traces.errors import TraceError
from gpuscope.traces.location import is_url

_F = TypeVar("_F", bound=Callable[..., Any])
PASSED: tuple[type[BaseException], ...] = (GpuscopeError, TraceError, StoreError, AnalysisError, typer.Exit,
                                          typer.Abort, typer.TyperException, BrokenPipeError)
"""What a command raises on purpose (user errors, exit codes, a closed pipe), handled by ``main`` as it is."""
_GUARDED = "__gpuscope_guarded__"


def guarded(command: str, fn: _F) -> _F:
    """``fn`` (the command ``gpuscope COMMAND``) with every unexpected exception raised as an AnalysisError."""
    if getattr(fn, _GUARDED, False):
        return fn
    arguments = _argument_names(fn)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except PASSED:
            raise
        except Exception as exc:
            # AnalysisError masks what it is given (gpuscope.model.redact): the exception's own text may quote a
            # URL with its password or token
            raise AnalysisError.wrap(exc, what=subject(kwargs, arguments), stage=f"`gpuscope {command}`") from exc

    setattr(run, _GUARDED, True)
    return run  # type: ignore[return-value]


def guard_all(app: typer.Typer) -> None:
    """Every command registered on ``app`` so far, guarded (each once)."""
    for info in app.registered_commands:
        if info.callback is not None:
            name = info.name or info.callback.__name__
            info.callback = guarded(name, info.callback)


def subject(kwargs: Mapping[str, Any], arguments: tuple[str, ...]) -> str:
    """What the command was pointed at, as it may be shown: its positional arguments (URLs without credentials
    or query; a command line to run is left out, it may hold anything); empty when it has none."""
    shown = [_shown(kwargs[name]) for name in arguments if isinstance(kwargs.get(name), (str, int))]
    return " and ".join(s for s in shown if s)


def _shown(value: str | int) -> str:
    text = str(value)
    return bare_url(text) if is_url(text) else redact_text(text)


def _argument_names(fn: Callable[..., Any]) -> tuple[str, ...]:
    """The names of ``fn``'s parameters that typer reads as positional arguments."""
    try:
        hints = get_type_hints(fn, include_extras=True)
    except (NameError, TypeError):  # an annotation that does not resolve: the defaults still tell
        hints = {}
    names = []
    for name, param in inspect.signature(fn).parameters.items():
        declared = (param.default, *get_args(hints.get(name)))
        if any(isinstance(d, ArgumentInfo) for d in declared):
            names.append(name)
    return tuple(names)
