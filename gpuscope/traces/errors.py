"""The one error the trace reader raises for a file a user gave it (and its kind for a command out of time)."""

from __future__ import annotations

from pathlib import Path

from gpuscope.model.redact import redact_text


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong (every secret in either
    masked by ``gpuscope.model.redact``)."""

    def __init__(self, path: Path | str, problem: str, *, not_a_trace: bool = False) -> None:
        path, problem = redact_text(str(path)), redact_text(problem)
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.not_a_trace = not_a_trace
        """The file is valid JSON of another kind (no ``traceEvents``): no rank's trace, rather than a broken one."""

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str], dict[str, object]]:
        # By its fields: a worker process hands a bad file's error back to the reader pickled (``not_a_trace`` too).
        return type(self), (self.path, self.problem), self.__dict__


class RemoteTimeout(TraceError):
    """The command's deadline passed while a file was listed or read: not one bad file among others, but the end
    of the command (the other files are not waited for)."""
