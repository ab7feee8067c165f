"""Running Python as another user (nobody) from a checkout that user may not read.

A clone in a private (0700) directory, a virtualenv inside it, or an interpreter under /root (pyenv's) cannot be
read or run by nobody, so a test that runs its target as nobody straight from the checkout fails or has to skip.
Instead, the tests get what nobody runs in a temporary folder it may read (``readable_python``):

- the target scripts (tests/targets) and gpuscope's source, copied (a few hundred kB);
- the interpreter and its standard library, and the virtualenv's packages, each used where it is, when nobody can
  already read it, else mirrored by hard links: the same files under folders nobody may enter, no data copied (a
  file is copied only where a link cannot be made, across file systems, or where the file itself is private);
- a ``pyvenv.cfg`` that makes the mirrored interpreter a virtualenv of the mirrored packages.

Whether nobody can run something is asked of the kernel, not guessed from modes: the probe runs as nobody through
``env``, because ``setpriv`` itself keeps root's capabilities until it execs, and would reach a private path.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

AS_NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


def cannot_switch_user() -> str | None:
    """Why this process cannot run commands as nobody (not root, no setpriv), or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return "needs root and setpriv"
    return None


def nobody_can(*argv: str, env: dict[str, str] | None = None) -> bool:
    """Whether ``argv`` succeeds run as nobody (exec'd by ``env``, as nobody)."""
    probe = subprocess.run([*AS_NOBODY, "env", *argv], capture_output=True, env=env, timeout=120)
    return probe.returncode == 0


@dataclass(frozen=True)
class NobodyPython:
    """An interpreter with this one's packages, gpuscope and the test targets, all readable by nobody."""

    python: Path
    targets: Path
    """A copy of tests/targets."""
    env: dict[str, str]
    """The environment to run ``python`` with (gpuscope's copied source first on PYTHONPATH, the mirrored
    interpreter's library path where it needs one, py-spy's folder first on PATH)."""
    pyspy: Path | None
    """py-spy where nobody can run it (beside ``python`` too, where gpuscope looks first); None without py-spy."""

    def argv(self, *args: str) -> list[str]:
        """A command line that runs ``python *args`` as nobody."""
        return [*AS_NOBODY, "env", str(self.python), *args]


@contextmanager
def readable_python(root: Path) -> Iterator[NobodyPython]:
    """A NobodyPython for the checkout at ``root``, in a temporary folder removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="gpuscope-nobody-"))
    try:
        folder.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH")}
        home, library = _interpreter(folder / "base", in_venv=sys.prefix != sys.base_prefix)
        if library is not None:
            env["LD_LIBRARY_PATH"] = str(library)
        python = _venv(folder / "venv", home) if sys.prefix != sys.base_prefix else home / VERSION
        _copy(root / "gpuscope", folder / "src" / "gpuscope")
        _copy(root / "tests" / "targets", folder / "targets")
        env["PYTHONPATH"] = str(folder / "src")
        env["HOME"] = str(folder)
        pyspy = _pyspy(folder / "bin", beside=python.parent if sys.prefix != sys.base_prefix else None)
        env["PATH"] = f"{folder / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
        yield NobodyPython(python=python, targets=folder / "targets", env=env, pyspy=pyspy)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _interpreter(mirror: Path, *, in_venv: bool) -> tuple[Path, Path | None]:
    """The bin folder of a base interpreter nobody can run (this one's, or its mirror), and the library folder the
    mirror needs on LD_LIBRARY_PATH (its libpython; the binary's RUNPATH names the private original)."""
    base = Path(sys.base_prefix)
    executable = base / "bin" / VERSION
    if nobody_can(str(executable), "-c", "import encodings"):
        return executable.parent, None
    _link(executable, mirror / "bin" / VERSION)
    for lib in (base / "lib").glob("libpython*"):
        _link(lib, mirror / "lib" / lib.name)
    _link_tree(base / "lib" / VERSION, mirror / "lib" / VERSION, skip=() if not in_venv else ("site-packages",))
    return mirror / "bin", mirror / "lib"


def _venv(venv: Path, home: Path) -> Path:
    """A virtualenv of ``home``'s interpreter over this one's packages (used in place when nobody can read them)."""
    _folder(venv / "bin")
    (venv / "pyvenv.cfg").write_text(f"home = {home}\ninclude-system-site-packages = false\n"
                                     f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
    (venv / "pyvenv.cfg").chmod(0o644)
    (venv / "bin" / "python").symlink_to(home / VERSION)
    site = Path(sysconfig.get_paths()["purelib"])
    target = venv / site.relative_to(sys.prefix)
    for folder in (venv / "lib", target.parent):
        _folder(folder)
    sample = next(site.glob("*.py"), site)
    if nobody_can("ls", str(site)) and nobody_can("test", "-r", str(sample)):
        target.symlink_to(site)
    else:
        _link_tree(site, target)
    return venv / "bin" / "python"


def _pyspy(folder: Path, *, beside: Path | None) -> Path | None:
    """This interpreter's py-spy (beside it, else on PATH) linked into ``folder``, and beside nobody's interpreter
    when that is a folder of its own (gpuscope's find_pyspy looks there first)."""
    found = Path(sys.executable).with_name("py-spy")
    source = found if found.is_file() else Path(shutil.which("py-spy") or "/nonexistent")
    if not source.is_file():
        return None
    _link(source, folder / "py-spy")
    if beside is not None:
        _link(source, beside / "py-spy")
    return folder / "py-spy"


def _link_tree(source: Path, target: Path, *, skip: tuple[str, ...] = ()) -> None:
    """``source``'s files linked under ``target`` (``skip``: folders of ``source`` itself left out); compiled
    bytecode comes along, so nobody's interpreter does not compile the standard library at each start."""
    for folder, dirs, files in os.walk(source):
        here = Path(folder)
        mirror = target / here.relative_to(source)
        _folder(mirror)
        kept = []
        for name in dirs:
            if here == source and name in skip:
                continue
            if (here / name).is_symlink():
                (mirror / name).symlink_to(os.readlink(here / name))
            else:
                kept.append(name)
        dirs[:] = kept
        for name in files:
            _link(here / name, mirror / name)


def _link(source: Path, target: Path) -> None:
    """``target`` as a hard link to ``source`` when all may read it, else as a copy all may read."""
    _folder(target.parent)
    if not source.exists():
        return  # a dangling symlink
    mode = source.stat().st_mode
    if mode & stat.S_IROTH:
        try:
            os.link(source, target)
            return
        except OSError:
            pass  # another file system
    shutil.copy2(source, target)
    _readable(target)


def _copy(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    for folder, _dirs, files in os.walk(target):
        _folder(Path(folder))
        for name in files:
            _readable(Path(folder) / name)
    _folder(target.parent)


def _folder(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)


def _readable(path: Path) -> None:
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
               | (stat.S_IXGRP | stat.S_IXOTH if mode & stat.S_IXUSR else 0))
