"""Odd and broken answers for gpuscope's readers of HTTP peers, each made from one ``random.Random``.

- ``dcgm_scrape``: what a dcgm-exporter endpoint serves (Prometheus text), from the recorded scrapes of
  sample_traces/dcgm or generated in every label dialect, then changed line by line (values that are sentinels,
  NaN, huge or not numbers; labels escaped oddly, repeated, unbalanced, very long; comments, timestamps, exemplars)
  and byte by byte (flipped bits, cuts, repeats, junk, non-UTF-8, NUL).
- ``prometheus_answer``: what ``/api/v1/query_range`` answers, generated (series in each label dialect, points in
  and out of the window, values as Prometheus writes them and as it never does), then changed as a JSON document (a
  field of the wrong type or left out, a key twice, deep nesting, huge numbers, an error status) and byte by byte.

Everything drawn comes from the ``rng`` passed in, so an input is made again from its seed alone;
``fuzz_http_readers.py`` runs them, and the tests drive the same functions from Hypothesis (``st.randoms()``).
"""

from __future__ import annotations

import gzip
import json
import random
import sys
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fuzz_inputs  # noqa: E402 - a sibling script, not a package
from fuzz_inputs import Pairs, Raw  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DCGM_SAMPLES = ROOT / "sample_traces" / "dcgm"
JUNK = [b"\x00", b"\xff\xfe", b"\xc3\x28", b"\xed\xa0\x80", b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n",
        b"\r\n", b"#", b"=", b"NaN", b"+Inf", b"-Inf", b"1e309", b"9" * 40, b"\x1b]0;pwned\x07", "\u202e".encode(),
        b"<script>", b" " * 64]
"""Bytes that break parsers: NUL, invalid and overlong UTF-8, lone surrogates, structure, escapes, control codes."""
WINDOW_S = (1000.0, 1600.0, 60.0)
"""The fleet window the Prometheus answers are read for: start, end and step (10 buckets, points at 1060..1600)."""
NUMBERS = ["0", "1", "-1", "50", "100", "101", "0.5", "1e3", "1E-3", "-0", "1e308", "1e309", "-1e309", "4.9e-324",
           "9223372036854775794", "9223372036854775807", "9223372036854775808", "2147483632", "2147483647",
           "140737488355328", "18446744073709551616", "1" + "0" * 400, "NaN", "+Inf", "-Inf", "nan", "inf", "0x10",
           "1_000", "", " 5", "5 ", "1.2.3", "--1", "+1", ".5", "5.", "e5"]
"""Values as exporters write them, and as they never should."""
VALID_VALUES = ["0", "1", "-1", "101", "1e+06", "0.000001", "1.7976931348623157e+308", "4.9e-324", "NaN", "+Inf",
                "-Inf", "9223372036854775794", "9223372036854775807", "2147483632", "2147483647", "140737488355328",
                "18446744073709551616", "-0"]
"""Values a Prometheus can answer: its float formatting of anything a series may hold, sentinels included."""
LABELS = ["gpu", "UUID", "uuid", "Hostname", "hostname", "modelName", "device", "pci_bus_id", "GPU_I_ID",
          "GPU_I_PROFILE", "pod", "namespace", "container", "pod_name", "pod_namespace", "exported_pod",
          "exported_namespace", "instance", "job", "hpc_job", "DCGM_FI_DRIVER_VERSION", "err", "__name__"]
METRICS = ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED",
           "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_PROF_DRAM_ACTIVE",
           "DCGM_FI_DEV_SM_CLOCK", "dcgm_gpu_utilization", "dcgm_fi_dev_gpu_util", "dcgm_fb_used",
           "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_DEV_XID_ERRORS", "go_goroutines",
           "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "dcgm_unknown_field", ""]


def dumps(node: Any) -> bytes:
    """JSON text of ``node`` with ``Raw`` and ``Pairs`` written as they say (iterative: any depth)."""
    out: list[bytes] = []
    stack: list[Any] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Raw):
            out.append(bytes(item))
        elif isinstance(item, Pairs | dict):
            pairs = item.pairs if isinstance(item, Pairs) else list(item.items())
            parts: list[Any] = [Raw(b"}")]
            for i, (key, value) in enumerate(reversed(pairs)):
                parts += [value, Raw(json.dumps(str(key)).encode() + b":")]
                if i < len(pairs) - 1:
                    parts.append(Raw(b","))
            stack += [*parts, Raw(b"{")]
        elif isinstance(item, list | tuple):
            parts = [Raw(b"]")]
            for i, value in enumerate(reversed(item)):
                parts.append(value)
                if i < len(item) - 1:
                    parts.append(Raw(b","))
            stack += [*parts, Raw(b"[")]
        else:
            out.append(json.dumps(item).encode())
    return b"".join(out)


def mutate_bytes(rng: random.Random, data: bytes, ops: int | None = None) -> bytes:
    """``data`` after 1-4 byte-level changes (``fuzz_inputs.mutate_bytes``), inserting this module's ``JUNK``."""
    return fuzz_inputs.mutate_bytes(rng, data, ops, junk=JUNK)


def odd_text(rng: random.Random) -> str:
    """A label value or name as an exporter might send it, or worse."""
    return rng.choice([
        "0", "1", "7", "-1", "1e3", " 1", "01", "99999999999999999999", "", "GPU-x", "<<<NULL>>>", "3g.40gb",
        "node-1", "train-llama-0", "a\\\"b", "a\\nb", "\\", "é", "\u202e", "\x1b[2J", "{{7*7}}", "x" * 10_000,
        str(rng.randint(-5, 2**40)), rng.randbytes(rng.randint(1, 12)).decode("latin-1"),
    ])


# -- dcgm-exporter scrapes ----------------------------------------------------------------------------


@cache
def recorded_scrapes() -> tuple[bytes, ...]:
    """The bundled dcgm-exporter scrapes: the exporter README's, DataDog's fixtures, excerpts from its issues."""
    files = sorted((DCGM_SAMPLES / "third_party_samples").glob("*.prom")) + sorted(DCGM_SAMPLES.glob("*.txt"))
    return tuple(path.read_bytes() for path in files)


def generated_scrape(rng: random.Random) -> bytes:
    """A scrape of a few GPUs (MIG instances too) in one label dialect, values drawn from ``NUMBERS``."""
    lines = []
    for _ in range(rng.randint(0, 40)):
        name = rng.choice(METRICS)
        labels = [(rng.choice(LABELS), odd_text(rng) if rng.random() < 0.2 else str(rng.randint(0, 8)))
                  for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.8:
            labels.insert(0, ("gpu", str(rng.randint(0, 7)) if rng.random() < 0.9 else odd_text(rng)))
        body = ",".join(f'{k}="{v}"' for k, v in labels)
        value = rng.choice(NUMBERS) if rng.random() < 0.6 else repr(rng.uniform(-10, 1e6))
        stamp = f" {rng.randint(-(2**63), 2**63)}" if rng.random() < 0.1 else ""
        lines.append(f"{name}{{{body}}} {value}{stamp}" if labels or rng.random() < 0.5 else f"{name} {value}")
        if rng.random() < 0.1:
            lines.insert(rng.randrange(len(lines)), rng.choice([
                f"# TYPE {name} {rng.choice(['gauge', 'counter', 'histogram', 'summary', 'nonsense', ''])}",
                f"# HELP {name} {odd_text(rng)}", "# EOF", "#", f'# {{trace_id="{odd_text(rng)}"}} 1']))
    return "\n".join(lines).encode("utf-8", errors="surrogatepass") + (b"\n" if rng.random() < 0.9 else b"")


def mutate_lines(rng: random.Random, data: bytes) -> bytes:
    """Line-level changes: lines dropped, repeated, swapped, cut, their value or a label replaced."""
    lines = data.split(b"\n")
    for _ in range(rng.randint(1, 6)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines[i:i] = [lines[i]] * rng.choice((2, 10, 1000))
        elif op == 2:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == 3:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == 4:
            head, _, _ = lines[i].rpartition(b" ")
            lines[i] = (head or lines[i]) + b" " + rng.choice(NUMBERS).encode()
        else:
            name, brace, rest = lines[i].partition(b"{")
            extra = f'{rng.choice(LABELS)}="{odd_text(rng)}",'.encode("utf-8", errors="surrogatepass")
            lines[i] = name + b"{" + extra + rest if brace else lines[i] + b"{" + extra
    return b"\n".join(lines)


def dcgm_scrape(rng: random.Random) -> bytes:
    """One scrape body: recorded or generated, then changed by lines and (often) by bytes."""
    data = rng.choice(recorded_scrapes()) if rng.random() < 0.5 else generated_scrape(rng)
    if rng.random() < 0.8:
        data = mutate_lines(rng, data)
    if rng.random() < 0.5:
        data = mutate_bytes(rng, data)
    return data


# -- Prometheus range-query answers -------------------------------------------------------------------


def series_labels(rng: random.Random) -> dict[str, str]:
    """The labels of one dcgm-exporter series as Prometheus returns them, in one of the exporter's dialects."""
    labels = {"gpu": str(rng.randint(0, 7)), "Hostname": f"node-{rng.randint(0, 3)}", "modelName":
              rng.choice(["Tesla T4", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Unknown GPU"]),
              "UUID": f"GPU-{rng.randint(0, 9999)}", "instance": f"10.0.0.{rng.randint(1, 9)}:9400"}
    if rng.random() < 0.3:
        labels = {k.lower(): v for k, v in labels.items()}
    if rng.random() < 0.5:
        labels |= {"pod": f"train-{rng.randint(0, 3)}", "namespace": rng.choice(["ml", "inference"])}
    if rng.random() < 0.2:
        labels |= {"exported_pod": f"serve-{rng.randint(0, 3)}", "exported_namespace": "inference"}
    if rng.random() < 0.15:
        labels |= {"GPU_I_ID": str(rng.randint(0, 14)), "GPU_I_PROFILE": rng.choice(["1g.10gb", "3g.40gb"])}
    for _ in range(rng.randint(0, 2) if rng.random() < 0.3 else 0):
        labels[rng.choice(LABELS)] = odd_text(rng)
    return labels


def series_points(rng: random.Random) -> list[Any]:
    """Points in the window (some left out, some out of it), values plain, odd but valid, or (rarely) not numbers."""
    start_s, end_s, step_s = WINDOW_S
    times = [start_s + step_s * (i + 1) for i in range(int((end_s - start_s) / step_s))]
    if rng.random() < 0.2:
        times = rng.sample(times, rng.randint(0, len(times)))
    if rng.random() < 0.1:
        times += [rng.choice([0, -1, 1e12, 1e300, 2**63, 1059.999, 1600.5]) for _ in range(rng.randint(1, 3))]
    kind = rng.random()
    values = ([0, 12.5, 50, 99.9, 100] if kind < 0.55 else VALID_VALUES if kind < 0.97 else NUMBERS)
    return [[t, str(rng.choice(values))] for t in times]


def generated_answer(rng: random.Random) -> Any:
    """A range query's answer, as a document ``mutate_doc`` can change."""
    if rng.random() < 0.05:
        return {"status": "error", "errorType": rng.choice(["bad_data", "execution", "timeout", odd_text(rng)]),
                "error": odd_text(rng)}
    series = [{"metric": series_labels(rng), "values": series_points(rng)} for _ in range(rng.randint(0, 8))]
    answer: dict[str, Any] = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    if rng.random() < 0.1:
        answer["warnings"] = [odd_text(rng) for _ in range(rng.randint(1, 3))]
    return answer


def mutate_doc(rng: random.Random, node: Any) -> Any:
    """One to three JSON-level changes somewhere in ``node``: a value of another type, a key left out or written
    twice, a huge or odd number, deep nesting."""
    for _ in range(rng.randint(1, 3)):
        path = _random_path(rng, node)
        node = _change_at(rng, node, path)
    return node


def _random_path(rng: random.Random, node: Any) -> list[Any]:
    path: list[Any] = []
    while isinstance(node, dict | list) and node and rng.random() < 0.75:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    return path


def _odd_value(rng: random.Random) -> Any:
    return rng.choice([
        None, True, 0, -1, 1.5, "", "x", [], {}, [[1]], {"a": 1}, Raw(b"1e999"), Raw(b"-1e999"), Raw(b"NaN"),
        Raw(b"9" * 10_000), Raw(b"[" * 10_000 + b"]" * 10_000), Raw(b'"\\ud800"'), Raw(b'"\xff"'), 2**64,
        odd_text(rng), [[1060, "50"]] * rng.choice((1, 1000)), Pairs([("gpu", "0"), ("gpu", "1")]),
    ])


def _change_at(rng: random.Random, root: Any, path: list[Any]) -> Any:
    if not path:
        return _odd_value(rng)
    parent = root
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    op = rng.randrange(4)
    if op == 0 or not isinstance(parent, dict):
        parent[key] = _odd_value(rng)
    elif op == 1:
        del parent[key]
    elif op == 2:
        items = list(parent.items())
        holder = _parent_of(root, path)
        replaced = Pairs(items + [(key, _odd_value(rng))])
        if holder is None:
            return replaced
        holder[path[-2]] = replaced
    else:
        parent[key] = [parent[key]] if rng.random() < 0.5 else {"v": parent[key]}
    return root


def _parent_of(root: Any, path: list[Any]) -> Any:
    if len(path) < 2:
        return None
    node = root
    for key in path[:-2]:
        node = node[key]
    return node


def prometheus_answer(rng: random.Random) -> bytes:
    """One answer body: generated, then (often) changed as a document and as bytes."""
    doc = generated_answer(rng)
    if rng.random() < 0.3:
        doc = mutate_doc(rng, doc)
    data = dumps(doc)
    if rng.random() < 0.15:
        data = mutate_bytes(rng, data)
    return data


def content_encoding(rng: random.Random, data: bytes) -> tuple[bytes, dict[str, str]]:
    """The body as sent: usually as it is, sometimes gzip-encoded (and then sometimes broken)."""
    if rng.random() < 0.85:
        return data, {}
    packed = gzip.compress(data, mtime=0)
    if rng.random() < 0.3:
        packed = mutate_bytes(rng, packed, 1)
    return packed, {"Content-Encoding": "gzip"}
