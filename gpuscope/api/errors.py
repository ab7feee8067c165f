"""The one exception the Python API raises for a mistake or condition the user can fix."""

from __future__ import annotations

from gpuscope.cli.common import UserError


class GpuscopeError(UserError):
    """A bad path, an unreadable trace, an unknown run id, a bad price setting, a process that is gone.

    Its message is one line, the same the command line prints after ``gpuscope: error:``. It is a
    ``UserError``, so a script that drives both the API and the CLI catches one type.
    """
