"""Where an allocation was made, and what that says of its phase in a training step.

A snapshot's stacks hold Python frames and, on Linux, C++ ones. An allocation is grouped by its Python frames
(the same line reached through the same calls is one place, whichever layer of a loop made it), or by its C++
frames past the allocator's own where no Python frame was recorded (the autograd engine's thread has none). Its
phase comes from the frames: an optimizer's ``step`` (``torch/optim/``), the autograd engine (``backward``),
building or moving the model, else the forward pass. A trace's allocations are grouped by the op they were made in.
"""

from __future__ import annotations

import re

import numpy as np

from gpuscope.analyzers.memory.history import I32, U8, Phase, Site
from gpuscope.model.memory import SourceFrame
from gpuscope.model.snapshot import Frame

MAX_FRAMES = 12
"""Frames kept for a place: enough to read the call path, not the interpreter's."""
_ALLOCATOR = ("unwind", "CapturedTraceback", "gather_with_cpp", "CachingAllocator", "Allocator::", "empty_",
              "::empty", "TensorBase", "resize_bytes", "allocate")
"""Words of the C++ frames of the allocator and of tensor creation, which every allocation's stack starts with:
they name no place."""
_ENGINE = ("torch::autograd::Engine::", "torch::autograd::python::PythonEngine", "autograd::engine::")
_INIT_FUNCTIONS = frozenset({"_apply", "to", "cuda", "load_state_dict", "_load_from_state_dict", "to_empty",
                             "reset_parameters", "__init__"})
_TRACE_PY = re.compile(r"^(?P<file>.+)\((?P<line>\d+)\): (?P<name>.+)$")


def is_python(frame: Frame | SourceFrame) -> bool:
    return ".py" in frame.filename


def _path(frame: Frame | SourceFrame) -> str:
    return frame.filename.replace("\\", "/")


def is_library(frame: Frame | SourceFrame) -> bool:
    """A frame in torch or another installed package, not in the user's code."""
    path = _path(frame)
    return "/site-packages/" in path or "/dist-packages/" in path or "/torch/" in path or path.startswith("<")


def phase_of_frames(frames: list[Frame]) -> Phase:
    """The phase a stack's frames show (innermost first); UNKNOWN where they show none."""
    names = [f.name for f in frames if not is_python(f)]
    if any("AccumulateGrad" in n for n in names):
        return Phase.GRADIENT
    py = [f for f in frames if is_python(f)]
    if any("/torch/optim/" in _path(f) or ("/optim/" in _path(f) and f.name in ("step", "zero_grad")) for f in py):
        return Phase.OPTIMIZER
    if any(n.startswith(_ENGINE) for n in names) or any(
            f.name in ("_engine_run_backward", "backward") and _path(f).endswith(("torch/autograd/__init__.py",
                                                                                "torch/autograd/graph.py",
                                                                                "torch/_tensor.py")) for f in py):
        return Phase.BACKWARD
    if not py:
        return Phase.UNKNOWN
    if any(f.name == "forward" or f.name == "_call_impl" for f in py):
        return Phase.FORWARD
    if any(f.name in _INIT_FUNCTIONS and (is_library(f) or f.name == "__init__") for f in py) or any(
            _path(f).endswith(("torch/nn/init.py", "torch/nn/parameter.py")) for f in py):
        return Phase.INIT
    return Phase.FORWARD


def place_frames(frames: list[Frame]) -> tuple[SourceFrame, ...]:
    """The frames that name the place: the Python ones, else the C++ ones past the allocator's; innermost first."""
    chosen = [f for f in frames if is_python(f)]
    if not chosen:
        skip = 0
        while skip < len(frames) and any(word in frames[skip].name for word in _ALLOCATOR):
            skip += 1
        chosen = frames[skip:]
    return tuple(SourceFrame(f.name, f.filename, f.line) for f in chosen[:MAX_FRAMES])


def label_of(frames: tuple[SourceFrame, ...]) -> str:
    """The frame a person would open: the innermost in the user's code, else the innermost recorded."""
    if not frames:
        return "no frames recorded"
    user = next((f for f in frames if is_python(f) and not is_library(f)), None)
    f = user or frames[0]
    where = _path(f).rsplit("/", 1)[-1]
    return f"{f.name} ({where}:{f.line})" if is_python(f) else f.name[:120]


def snapshot_sites(frames: tuple[Frame, ...], stacks: tuple[tuple[int, ...], ...]) -> tuple[list[Site], I32, U8]:
    """The distinct places the stacks name, and for each stack its place and phase."""
    sites: list[Site] = []
    index: dict[tuple[SourceFrame, ...], int] = {}
    site_of = np.zeros(len(stacks), dtype=np.int32)
    phase_of = np.zeros(len(stacks), dtype=np.uint8)
    for k, ids in enumerate(stacks):
        stack = [frames[i] for i in ids]
        place = place_frames(stack)
        if place not in index:
            index[place] = len(sites)
            sites.append(Site(frames=place, op=None, label=label_of(place)))
        site_of[k] = index[place]
        phase_of[k] = phase_of_frames(stack)
    return sites, site_of, phase_of


def trace_frame(name: str) -> SourceFrame:
    """A trace's Python function event ("model.py(54): forward") as a frame."""
    m = _TRACE_PY.match(name)
    if m is None:
        return SourceFrame(name=name, filename="", line=0)
    return SourceFrame(name=m["name"], filename=m["file"], line=int(m["line"]))


def phase_of_ops(names: list[str]) -> Phase:
    """The phase the ops and annotations an allocation was made in show (innermost first)."""
    if any(n.startswith(("Optimizer.step#", "Optimizer.zero_grad#")) for n in names):
        return Phase.OPTIMIZER
    if any("AccumulateGrad" in n for n in names):
        return Phase.GRADIENT
    if any(n.startswith("autograd::engine::evaluate_function") for n in names):
        return Phase.BACKWARD
    return Phase.FORWARD if names else Phase.UNKNOWN
