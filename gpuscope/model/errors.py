"""A failure of gpuscope's own analysis: the data was read fine, so the fault is ours, not the user's.

A trace that cannot be read is the user's to fix (``TraceError``, exit code 2); an exception raised while analysing
one that was read is a bug, told as such: which trace, which stage and where in gpuscope, and a request to report
it (``EXIT_INTERNAL``). It crosses process boundaries (the trace loader's workers), so it pickles by its fields.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from gpuscope.model.redact import redact_text

EXIT_INTERNAL = 3
"""The command line's exit status for an analysis error (0 success, 1 a gate's regression, 2 bad input)."""
_HERE = Path(__file__).resolve()
_PACKAGE = _HERE.parent.parent
_P = ParamSpec("_P")
_T = TypeVar("_T")
_A = TypeVar("_A")


class AnalysisError(Exception):
    """gpuscope failed analysing data it read fine: ``what`` (a trace file, a folder of ranks, a run; empty when a
    command was given nothing), the ``stage`` that failed (an analysis, or a command), and ``cause`` (the exception,
    and the gpuscope function that raised it)."""

    def __init__(self, what: str, stage: str, cause: str) -> None:
        what, stage, cause = redact_text(what), redact_text(stage), redact_text(cause)
        told = f"{stage} of {what}" if what else stage
        super().__init__(f"{told} failed ({cause}). This is a bug in gpuscope, not in your data: please report it "
                         "with this line, `gpuscope --version` and, if you can share it, the trace.")
        self.what, self.stage, self.cause = what, stage, cause

    def __reduce__(self) -> tuple[type[AnalysisError], tuple[str, str, str]]:
        return AnalysisError, (self.what, self.stage, self.cause)

    @classmethod
    def wrap(cls, exc: BaseException, *, what: str, stage: str) -> AnalysisError:
        """The error for ``exc``, raised during ``stage`` on ``what``, naming where in gpuscope it was raised."""
        return cls(what, stage, f"{type(exc).__name__}: {exc}{_where(exc)}")


def analysis_stage(stage: str, what: Callable[[_A], str]) -> Callable[
        [Callable[Concatenate[_A, _P], _T]], Callable[Concatenate[_A, _P], _T]]:
    """Any exception a function of data already read raises becomes an AnalysisError naming ``stage`` and
    ``what(first argument)``; an AnalysisError from further in passes as it is."""
    def decorate(fn: Callable[Concatenate[_A, _P], _T]) -> Callable[Concatenate[_A, _P], _T]:
        @functools.wraps(fn)
        def run(data: _A, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
            try:
                return fn(data, *args, **kwargs)
            except AnalysisError:
                raise
            except Exception as exc:
                raise AnalysisError.wrap(exc, what=what(data), stage=stage) from exc
        return run
    return decorate


def _where(exc: BaseException) -> str:
    """`` in gpuscope.module.function`` for the innermost gpuscope frame of the exception's traceback."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = Path(frame.filename).resolve()
        if path.is_relative_to(_PACKAGE) and path != _HERE:
            module = ".".join(path.relative_to(_PACKAGE.parent).with_suffix("").parts)
            return f" in {module}.{frame.name}"
    return ""
