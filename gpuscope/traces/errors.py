"""The one error the trace reader raises for a file a user gave it."""

from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str, *, not_a_trace: bool = False) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem
        self.not_a_trace = not_a_trace
        """The file is valid JSON of another kind (no ``traceEvents``): no rank's trace, rather than a broken one."""

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str], dict[str, object]]:
        # By its fields: a worker process hands a bad file's error back to the reader pickled (``not_a_trace`` too).
        return type(self), (self.path, self.problem), self.__dict__
