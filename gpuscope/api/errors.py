"""The one exception gpuscope raises for a mistake or condition the user can fix."""

from __future__ import annotations

from gpuscope.model.redact import redact_text


class GpuscopeError(Exception):
    """A bad path, an unreadable trace, an unknown run id, a bad price setting, a process that is gone.

    Its message is one line, the same the command line prints after ``gpuscope: error:``. The command line's
    own user errors are of this type too, so a script that drives both the API and the CLI catches one type.
    (Every secret in it is masked, by ``gpuscope.model.redact.redact_text``, as it is raised.)
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))
