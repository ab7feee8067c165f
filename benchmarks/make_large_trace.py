"""Build a large multi-rank Kineto trace by scaling up a real sample.

The sample's events are repeated back to back: each copy's timestamps are shifted by the
sample's span, its correlation, flow and external ids are moved past the previous copy's,
and its ``ProfilerStep#N`` numbers continue where the previous copy stopped, so a reader
sees one longer run of the same job. Every rank file gets the same events and its own
``distributedInfo.rank``. Files hold one compact JSON event per line (optionally gzipped), never
inside the repository unless asked.

    python benchmarks/make_large_trace.py OUT_DIR --ranks 8 --mb 50 [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SAMPLE = ROOT / "sample_traces" / "resnet50_dataloader_bound"

Event = dict[str, Any]

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_ARG_IDS = ("correlation", "External id", "external id")
"""Args that tie events together; each copy gets its own range of them."""
_ARG_TIMES = ("external ts",)
"""Args that are timestamps and move with the copy."""
_ONCE_PHASES = frozenset({"M"})
"""Metadata events describe processes and threads, not time: written once."""


@dataclass(frozen=True)
class Sample:
    """One real trace, split into what is repeated and what is written once."""

    header: dict[str, Any]
    """Top-level keys other than ``traceEvents`` (deviceProperties, schemaVersion, ...)."""
    repeated: list[Event]
    """Events that happen in time: repeated once per copy."""
    once: list[Event]
    """Metadata and whole-trace events, written once per file."""
    span_us: float
    id_span: int
    first_step: int | None
    step_count: int


def read_sample(path: Path) -> Sample:
    """Read a sample trace (a ``.json``/``.json.gz`` file, or a directory holding exactly one)."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
        if len(files) != 1:
            raise ValueError(f"{path}: expected one trace file, found {len(files)}")
        path = files[0]
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    top = msgspec.json.decode(data)
    events: list[Event] = top.pop("traceEvents")
    top.pop("distributedInfo", None)
    repeated = [e for e in events if e.get("ph") not in _ONCE_PHASES and not _is_whole_trace(e)]
    once = [e for e in events if e.get("ph") in _ONCE_PHASES or _is_whole_trace(e)]
    timed = [e for e in repeated if isinstance(e.get("ts"), int | float)]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + (e.get("dur") or 0) for e in timed)
    steps = sorted(int(m.group(1)) for e in repeated if (m := _STEP_RE.match(str(e.get("name", "")))))
    return Sample(header=top, repeated=repeated, once=once, span_us=end - start, id_span=_max_id(repeated) + 1,
                  first_step=steps[0] if steps else None, step_count=len(steps))


def _is_whole_trace(event: Event) -> bool:
    # The "PyTorch Profiler (0)" span and the global "Record Window End"/"Iteration Start" marks cover the
    # whole recording; repeating them would add spans that overlap every copy.
    return event.get("cat") == "Trace" or event.get("s") == "g"


def _max_id(events: list[Event]) -> int:
    top = 0
    for e in events:
        if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
            top = max(top, e["id"])
        args = e.get("args")
        if isinstance(args, dict):
            for key in _ARG_IDS:
                value = args.get(key)
                if isinstance(value, int):
                    top = max(top, value)
    return top


def repeat_events(sample: Sample, copies: int) -> list[Event]:
    """The sample's timed events ``copies`` times over, back to back, with fresh ids and step numbers."""
    out: list[Event] = []
    for k in range(copies):
        if k == 0:
            out.extend(sample.repeated)
            continue
        shift_us = k * sample.span_us
        id_shift = k * sample.id_span
        step_shift = k * sample.step_count
        out.extend(_shifted(e, shift_us, id_shift, step_shift) for e in sample.repeated)
    return out


def _shifted(event: Event, shift_us: float, id_shift: int, step_shift: int) -> Event:
    e = dict(event)
    if isinstance(e.get("ts"), int | float):
        e["ts"] = e["ts"] + shift_us
    if e.get("ph") in ("s", "f", "t") and isinstance(e.get("id"), int):
        e["id"] = e["id"] + id_shift
    if step_shift and (m := _STEP_RE.match(str(e.get("name", "")))):
        e["name"] = f"ProfilerStep#{int(m.group(1)) + step_shift}"
    args = e.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in _ARG_IDS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] = args[key] + id_shift
        for key in _ARG_TIMES:
            if isinstance(args.get(key), int | float):
                args[key] = args[key] + shift_us
        e["args"] = args
    return e


def copies_for(sample: Sample, target_bytes: int) -> int:
    """How many copies of the sample make a rank file of about ``target_bytes`` of JSON."""
    one_copy = len(msgspec.json.encode(sample.repeated))
    return max(1, round(target_bytes / one_copy))


def write_ranks(sample: Sample, events: list[Event], out_dir: Path, *, ranks: int, gzip_level: int | None = None,
                stem: str = "rank", info_last: bool = False) -> list[Path]:
    """Write one trace file per rank into ``out_dir``: the same events, each with its own rank.

    The layout follows Kineto's: top-level keys first, ``distributedInfo`` written as ``"rank": N``
    with a space (Holistic Trace Analysis finds a file's rank by matching that text line by line,
    and puts every file where it does not match on rank 0), then one event per line, and like the
    sample no newline after the closing brace.

    ``info_last`` writes ``distributedInfo`` after the events instead (JSON does not order keys), so every
    rank's file starts with the same bytes: gzipped, that shared part is compressed once and each rank
    costs only its tail, which makes hundreds of ranks in seconds. Each file is still one gzip member.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    encoder = msgspec.json.Encoder()
    body = b",\n".join(encoder.encode(e) for e in sample.once + events) + b"\n]"
    suffix = ".pt.trace.json" + (".gz" if gzip_level is not None else "")
    paths = [out_dir / f"{stem}{rank}{suffix}" for rank in range(ranks)]
    if info_last:
        _write_info_last(sample, body, paths, gzip_level=gzip_level)
        return paths
    # One gzip member per file, as the profiler writes it (a reader that trusts the trailer's size
    # would be favoured by a layout no profiler writes, or hurt by one it does not).
    for rank, path in enumerate(paths):
        data = _head(sample.header, rank=rank, world_size=ranks) + body + b"}"
        path.write_bytes(data if gzip_level is None else gzip.compress(data, compresslevel=gzip_level, mtime=0))
    return paths


def _write_info_last(sample: Sample, body: bytes, paths: list[Path], *, gzip_level: int | None) -> None:
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in sample.header.items()]
    head = ("{\n" + "\n".join(lines) + '\n  "traceEvents": [\n').encode()
    shared = zlib.compressobj(gzip_level or 6, zlib.DEFLATED, 16 + zlib.MAX_WBITS) if gzip_level else None
    prefix = shared.compress(head + body) if shared is not None else head + body
    for rank, path in enumerate(paths):
        info = {"backend": "nccl", "rank": rank, "world_size": len(paths)}
        tail = f',\n  "distributedInfo": {json.dumps(info)}\n}}'.encode()
        if shared is None:
            path.write_bytes(prefix + tail)
        else:
            own = shared.copy()  # the compressor's state after the shared part: gzip header, window and CRC
            path.write_bytes(prefix + own.compress(tail) + own.flush())


def _head(header: dict[str, Any], *, rank: int, world_size: int) -> bytes:
    top = dict(header)
    top["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world_size}
    lines = [f"  {json.dumps(key)}: {json.dumps(value)}," for key, value in top.items()]
    return ("{\n" + "\n".join(lines) + '\n  "traceEvents": [\n').encode()


def make_large_trace(out_dir: Path, *, sample_path: Path = DEFAULT_SAMPLE, ranks: int = 8,
                     target_bytes: int = 50_000_000, copies: int | None = None,
                     gzip_level: int | None = None, info_last: bool = False) -> list[Path]:
    """Scale ``sample_path`` up to about ``target_bytes`` of JSON per rank (or exactly ``copies`` copies)
    and write ``ranks`` rank files into ``out_dir``. Returns the files written."""
    sample = read_sample(sample_path)
    n = copies if copies is not None else copies_for(sample, target_bytes)
    return write_ranks(sample, repeat_events(sample, n), out_dir, ranks=ranks, gzip_level=gzip_level,
                       info_last=info_last)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--sample", type=Path, default=DEFAULT_SAMPLE, help="trace file or one-file directory")
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb", type=float, default=50.0, help="about this many MB (1e6 bytes) of JSON per rank")
    parser.add_argument("--copies", type=int, default=None, help="exact number of copies (overrides --mb)")
    parser.add_argument("--gzip", type=int, nargs="?", const=6, default=None, metavar="LEVEL",
                        help="write .json.gz (level 6 unless given)")
    parser.add_argument("--info-last", action="store_true",
                        help="distributedInfo after the events: every rank shares one compressed prefix (fast for "
                             "hundreds of ranks; Holistic Trace Analysis cannot find the ranks in this layout)")
    args = parser.parse_args(argv)
    paths = make_large_trace(args.out_dir, sample_path=args.sample, ranks=args.ranks,
                             target_bytes=int(args.mb * 1e6), copies=args.copies, gzip_level=args.gzip,
                             info_last=args.info_last)
    total = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} files, {total / 1e6:.1f} MB, into {args.out_dir}")


if __name__ == "__main__":
    main()
