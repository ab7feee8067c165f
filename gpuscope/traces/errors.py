"""The one error the trace reader raises for a file a user gave it."""

from __future__ import annotations

from pathlib import Path


class TraceError(Exception):
    """A trace file gpuscope cannot read; the message names the file and what is wrong."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:
        # Worker processes send it back to the parent (pickled): rebuilt from both parts, not from the message.
        return TraceError, (self.path, self.problem)
