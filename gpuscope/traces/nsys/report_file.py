"""An Nsight Systems report (``.nsys-rep``, ``.qdrep`` before 2021.3) is a format only ``nsys`` reads: with ``nsys``
on PATH it is exported to SQLite in a temporary folder, within the command's deadline; without it, one line gives
the exact ``nsys export`` command to run.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from gpuscope.net.deadline import COMMAND_S, Timeouts
from gpuscope.traces.errors import RemoteTimeout, TraceError

REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
STDERR_LINE_CHARS = 300
"""Of what nsys said when its export failed, the last line, up to this length."""


def is_report(location: str) -> bool:
    return location.lower().endswith(REPORT_SUFFIXES)


def export_command(path: Path) -> str:
    """The ``nsys export`` command line that writes ``path``'s SQLite export beside it."""
    out = path.with_suffix(".sqlite")
    return (f"nsys export --type sqlite --output {shlex.quote(str(out))} --force-overwrite true "
            f"{shlex.quote(str(path))}")


@contextmanager
def exported(path: Path, *, timeouts: Timeouts | None) -> Iterator[Path]:
    """``path`` exported to SQLite by ``nsys`` (removed when the block ends). TraceError, naming the command to
    run, when ``nsys`` is not on PATH or its export fails; RemoteTimeout past the deadline (``COMMAND_S`` without
    one)."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceError(path, f"an Nsight Systems report, which only nsys reads, and nsys is not on PATH: export it "
                               f"with `{export_command(path)}` and analyse the .sqlite file")
    if not path.is_file():
        raise TraceError(path, "no such file" if not path.exists() else "not a regular file")
    seconds = timeouts.deadline.left_s() if timeouts is not None else COMMAND_S
    with TemporaryDirectory(prefix="gpuscope-nsys-") as folder:
        out = Path(folder) / "export.sqlite"
        command = [nsys, "export", "--type", "sqlite", "--output", str(out), "--force-overwrite", "true", str(path)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(seconds, 0.001), check=False,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise RemoteTimeout(path, f"nsys export did not finish within {seconds:.0f} s, the limit of the whole "
                                      "command (--timeout)") from None
        except OSError as exc:
            raise TraceError(path, f"nsys could not be run ({exc.strerror or exc})") from exc
        if done.returncode != 0 or not out.is_file():
            said = (done.stderr or done.stdout or "").strip().splitlines()
            last = said[-1][:STDERR_LINE_CHARS] if said else f"exit status {done.returncode}"
            raise TraceError(path, f"nsys export failed ({last})")
        yield out
