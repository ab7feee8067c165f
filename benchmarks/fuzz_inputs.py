"""Odd and broken inputs for gpuscope's readers of outside data, made from one ``random.Random`` each.

Byte-level mutations (flipped bits, cuts, repeats, inserted junk, non-UTF-8, NUL) and JSON-level ones (a field given
the wrong type, a huge or negative number, NaN, a key left out or written twice, deep nesting) of real inputs: the
bundled traces of sample_traces/, a gpuscope report saved as JSON, a gate config and a price config. Everything
drawn comes from the ``rng`` passed in, so an input is made again from its seed alone; ``fuzz_readers.py`` runs them,
and the tests drive the same functions from Hypothesis (``st.randoms()``), which can then shrink a failing input.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
SMALL_TRACES = ("dev/event_sync_multi_stream.json.gz", "dev/triton_example.json.gz", "dev/torch_compile_triton.json.gz",
                "torch_compile_cpu/first_call.json.gz", "dev/mi210_gpu_only.json.gz",
                "dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz")
"""Bundled traces of up to a few thousand events: small enough to mutate and analyse ten thousand times."""
COPIES_TRACE = "dlrm_8rank/worker0_step_12.1694128201545.pt.trace.json.gz"
"""The bundled trace the mutated copies are made of: one rank of a real 8-rank DLRM run (3,290 events)."""


class Raw(bytes):
    """JSON text written as it is: NaN, Infinity, 1e999, 10,000-digit integers, deep nesting, invalid UTF-8."""


class Pairs:
    """An object written from its pairs, so a key can appear twice (not a dict or list: mutations pass over it)."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        self.pairs = pairs


def dumps(node: Any) -> bytes:
    """JSON text of ``node``, with ``Raw`` and ``Pairs`` written as they say (the rest by the json module)."""
    raws: list[bytes] = []

    def token(value: Any) -> str:
        """The json module's hook for a type it cannot write: a token string (NUL, number, NUL), swapped below."""
        if isinstance(value, Raw):
            raws.append(bytes(value))
        elif isinstance(value, Pairs):
            raws.append(b"{" + b",".join(dumps(str(k)) + b":" + dumps(v) for k, v in value.pairs) + b"}")
        else:
            raise TypeError(f"not JSON: {type(value).__name__}")
        return f"\x00{len(raws) - 1}\x00"

    text = json.dumps(node, ensure_ascii=False, default=token).encode("utf-8", "surrogatepass")
    for i, raw in enumerate(raws):  # each token is a JSON string of its own: swap it, quotes and all
        text = text.replace(b'"\\u0000' + str(i).encode() + b'\\u0000"', raw, 1)
    return text


# -- odd values ------------------------------------------------------------------------------------------

def deep(rng: random.Random) -> Raw:
    depth = rng.choice((50, 900, 1100, 5000, 100_000))
    return Raw(b"[" * depth + b"]" * depth)


def odd_value(rng: random.Random) -> Any:
    """A value a reader should survive where a number, string or object was expected."""
    pick: list[Callable[[], Any]] = [
        lambda: None, lambda: True, lambda: False, lambda: "", lambda: [], lambda: {}, lambda: [1, "2", None],
        lambda: {"nested": {"deeper": [1, {"x": "y"}]}},
        lambda: "x" * rng.choice((1, 100, 100_000)), lambda: str(rng.randint(-10**6, 10**6)), lambda: "1e400",
        lambda: "nan", lambda: "-inf", lambda: "0x1f", lambda: " 12 ",
        lambda: 0, lambda: -1, lambda: rng.randint(-2**31, 2**31), lambda: 2**31, lambda: 2**63 - 1, lambda: 2**63,
        lambda: -(2**63) - 1, lambda: 2**64 + 1, lambda: 10 ** rng.randint(19, 300),
        lambda: -(10 ** rng.randint(19, 300)),
        lambda: Raw(b"9" * rng.choice((30, 5000, 20_000))), lambda: 1e308, lambda: -1e308, lambda: 5e-324,
        lambda: -0.0, lambda: rng.uniform(-1e6, 1e6), lambda: rng.uniform(0, 1e18), lambda: Raw(b"1e999"),
        lambda: Raw(b"-1e999"), lambda: Raw(b"NaN"), lambda: Raw(b"Infinity"), lambda: deep(rng),
        lambda: "\x1b]0;owned\x07\x1b[2J<script>alert(1)</script>[link=file:///etc/passwd]x[/link]",
        lambda: "\u202e\u0000\ud800", lambda: Raw(b'"\xff\xfe\xc3("'), lambda: Raw(b'"\\ud800"'),
        lambda: rng.random(), lambda: -rng.random(),
    ]
    return rng.choice(pick)()


# -- JSON-level mutations --------------------------------------------------------------------------------

def _containers(node: Any, rng: random.Random, limit: int = 6) -> list[Any]:
    """A random path of containers from the root down (each a dict or list), at most ``limit`` deep."""
    path = [node]
    while len(path) < limit:
        cur = path[-1]
        children = [v for v in (cur.values() if isinstance(cur, dict) else cur) if isinstance(v, dict | list)]
        if not children or (len(path) > 1 and rng.random() < 0.35):
            break
        path.append(rng.choice(children))
    return path


def mutate_doc(rng: random.Random, doc: Any, ops: int | None = None) -> Any:
    """``doc`` (a parsed JSON document, changed in place and returned) after 1-5 JSON-level changes."""
    for _ in range(ops or rng.randint(1, 5)):
        if isinstance(doc, Pairs):  # the root now has a key twice: done
            break
        target = rng.choice(_containers(doc, rng))
        if isinstance(target, list):
            _mutate_list(rng, target)
        else:
            doc = _mutate_dict(rng, target, doc)
    return doc


def _mutate_list(rng: random.Random, items: list[Any]) -> None:
    op = rng.randrange(6)
    if not items or op == 0:
        items.append(odd_value(rng))
    elif op == 1:
        items[rng.randrange(len(items))] = odd_value(rng)
    elif op == 2:
        start = rng.randrange(len(items))
        del items[start:start + rng.randint(1, max(1, len(items) // 4))]
    elif op == 3:
        items.insert(rng.randrange(len(items)), rng.choice(items))
    elif op == 4:
        rng.shuffle(items)
    else:
        items.clear()


def _mutate_dict(rng: random.Random, obj: dict[str, Any], doc: Any) -> Any:
    keys = list(obj)
    op = rng.randrange(6)
    if not keys or op == 0:
        obj[rng.choice(("ts", "dur", "ph", "name", "cat", "args", "pid", "tid", "x"))] = odd_value(rng)
    elif op == 1:
        obj[rng.choice(keys)] = odd_value(rng)
    elif op == 2:
        del obj[rng.choice(keys)]
    elif op == 3:  # a key written twice: which one a decoder keeps is its business, it must not fail over it
        key = rng.choice(keys)
        pairs = Pairs([*obj.items(), (key, odd_value(rng) if rng.random() < 0.5 else obj[key])])
        return _replace(doc, obj, pairs)
    elif op == 4:
        key = rng.choice(keys)
        value = obj[key]
        if isinstance(value, int | float) and not isinstance(value, bool):
            obj[key] = rng.choice((-value, value * 10 ** rng.randint(3, 300), value + 2**63, float(value) * 1e300))
        else:
            obj[key] = odd_value(rng)
    else:
        obj[rng.choice(keys)] = deep(rng)
    return doc


def _replace(doc: Any, old: Any, new: Any) -> Any:
    """``doc`` with the container ``old`` (found by identity) replaced by ``new``."""
    if doc is old:
        return new
    stack = [doc]
    while stack:
        cur = stack.pop()
        entries = list(cur.items()) if isinstance(cur, dict) else list(enumerate(cur)) if isinstance(cur, list) else []
        for key, value in entries:
            if value is old:
                cur[key] = new
                return doc
            if isinstance(value, dict | list):
                stack.append(value)
    return doc


# -- byte-level mutations --------------------------------------------------------------------------------

JUNK = (b"\x00", b"\xff\xfe", b"\xc3(", b"\xed\xa0\x80", b"\\u0000", b"NaN", b"1e999", b"-", b"]", b"}", b"{", b"[",
        b'"', b",", b":", b"9" * 400, b"[" * 3000, b"\x1b[2J", b"\r\n", b"\t" * 7)


def mutate_bytes(rng: random.Random, data: bytes, ops: int | None = None, *,
                 junk: Sequence[bytes] = JUNK) -> bytes:
    """``data`` after 1-4 byte-level changes: bit flips, a cut, a deleted or repeated stretch, inserted ``junk``."""
    buf = bytearray(data)
    for _ in range(ops or rng.randint(1, 4)):
        if not buf:
            buf += rng.choice(junk)
            continue
        op = rng.randrange(6)
        at = rng.randrange(len(buf))
        span = rng.randint(1, max(1, min(len(buf) - at, rng.choice((1, 8, 64, 4096)))))
        if op == 0:
            for _ in range(rng.randint(1, 8)):
                buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif op == 1:
            del buf[at:]
        elif op == 2:
            del buf[at:at + span]
        elif op == 3:
            buf[at:at] = buf[at:at + span] * rng.randint(2, 20)
        elif op == 4:
            buf[at:at] = rng.choice(junk) if rng.random() < 0.7 else rng.randbytes(rng.randint(1, 64))
        else:
            buf[at:at + span] = rng.randbytes(span)
    return bytes(buf)


# -- whole inputs ----------------------------------------------------------------------------------------

@cache
def sample_text(relative: str) -> bytes:
    """A bundled trace's JSON text (gunzipped)."""
    return gzip.decompress((SAMPLES / relative).read_bytes())


OLD_CATEGORIES = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "gpu_memset": "Memset", "cuda_runtime": "Runtime",
                  "cpu_op": "Operator", "user_annotation": "Operator", "python_function": "Operator"}
"""The 2021 Kineto schema's names for today's categories (the TensorBoard plugin's samples of PyTorch 1.8)."""


def old_schema(doc: Any) -> Any:
    """A trace written as Kineto of early 2021 wrote it: capitalised categories, no deviceProperties, a runtime
    call naming its op by a lower-case "external id"."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return doc
    doc.pop("deviceProperties", None)
    for event in doc["traceEvents"]:
        if isinstance(event, dict) and isinstance(event.get("cat"), str):
            event["cat"] = OLD_CATEGORIES.get(event["cat"], event["cat"])
            args = event.get("args")
            if event["cat"] == "Runtime" and isinstance(args, dict) and "External id" in args:
                args["external id"] = args.pop("External id")
    return doc


def mutated_trace(rng: random.Random, *, base: str | None = None, gz: bool | None = None,
                  old: bool = False) -> tuple[str, bytes]:
    """A mutated copy of a bundled trace: (file name, file bytes); gzipped or not as ``gz`` says (else drawn);
    with ``old``, in the 2021 schema (``old_schema``)."""
    text = sample_text(base or rng.choice(SMALL_TRACES))
    if old:
        text = dumps(old_schema(json.loads(text)))
    gz = rng.random() < 0.5 if gz is None else gz
    how = rng.random()
    if how < 0.55:
        text = dumps(mutate_doc(rng, json.loads(text)))
        if rng.random() < 0.2:
            text = mutate_bytes(rng, text, 1)
    elif how < 0.9 or not gz:
        text = mutate_bytes(rng, text)
    if how >= 0.97:  # valid JSON padded to tens of MB: a small gzip that inflates past a low cap
        cut = text.rfind(b"]") if b"]" in text else len(text)
        text = text[:cut] + b" " * rng.choice((1 << 20, 24 << 20, 48 << 20)) + text[cut:]
    if not gz:
        return "rank0.json", text
    packed = gzip.compress(text, compresslevel=1, mtime=0)
    if 0.9 <= how < 0.97:  # the compressed stream itself damaged
        packed = mutate_bytes(rng, packed)
    return "rank0.json.gz", packed


GATE_CONFIG = b"""alpha = 0.01
min_steps = 5
weak = "pass"
benchmark_prefix = "gpuscope"

[metrics.step_time]
threshold = 0.10
[metrics.gpu_busy]
enabled = false
[metrics.peak_memory]
threshold = 0.2
enabled = true
"""
CONFIG_KEYS = ("alpha", "min_steps", "weak", "benchmark_prefix", "metrics", "threshold", "enabled", "prices",
               "usd_per_gpu_hour", "gpus", "energy", "grid_kg_co2_per_kwh", "step_time", "gpu_busy", "x")
TOML_VALUES = (b"0.01", b"-1", b"0", b"1", b"2", b"1e308", b"inf", b"-inf", b"nan", b"true", b'"pass"', b'"fail"',
               b'"x"', b"[]", b"[1, 2]", b"{}", b"{threshold = 0.1}", b"1979-05-27T07:32:00Z", b"99999999999999999999",
               b"0x7fffffffffffffff", b"'\x1b[31m'", b'"\\u0000"', b"1_000", b"[[[[[[1]]]]]]")


def mutated_toml(rng: random.Random, base: bytes) -> bytes:
    """A TOML document: ``base`` with byte-level changes, deep nesting, one built from known and unknown keys and
    odd values, or (for a gate config) a well-formed one with values at and past their limits."""
    how = rng.random()
    if how < 0.3:
        return mutate_bytes(rng, base)
    if how < 0.38:
        depth = rng.choice((100, 1000, 5000))
        return base + b"\nx = " + b"[" * depth + b"]" * depth + b"\n"
    if how < 0.65 and base == GATE_CONFIG:
        return gate_config(rng)
    lines: list[bytes] = []
    for _ in range(rng.randint(1, 12)):
        if rng.random() < 0.25:
            table = b".".join(rng.choice(CONFIG_KEYS).encode() for _ in range(rng.randint(1, 3)))
            lines.append(b"[" + table + b"]")
        key = rng.choice(CONFIG_KEYS).encode() if rng.random() < 0.8 else json.dumps(rng.choice(("A100", "H100 80GB",
                                                                                                  "\u202e"))).encode()
        value = rng.choice(TOML_VALUES) if rng.random() < 0.8 else str(rng.uniform(-10, 10)).encode()
        lines.append(key + b" = " + value)
    text = b"\n".join(lines) + b"\n"
    return mutate_bytes(rng, text, 1) if rng.random() < 0.2 else text


METRICS = ("step_time", "gpu_busy", "cost_per_1k_steps", "exposed_comm_share", "data_loading_share", "peak_memory",
           "new_bottleneck")


def _toml_number(rng: random.Random, usual: list[str]) -> str:
    if rng.random() < 0.75:
        return rng.choice(usual)
    return rng.choice(["0", "-0.0", "1", "1e-300", "1e300", "inf", "nan", "-1", "100", "100.0001",
                       str(rng.uniform(0, 2)), str(rng.randint(2, 10**6)), "1_000_001", "99999999999999999999"])


def gate_config(rng: random.Random) -> bytes:
    """A well-formed gate config whose values are drawn from the usual ones, their limits and past them."""
    lines = []
    if rng.random() < 0.7:
        lines.append("alpha = " + _toml_number(rng, ["0.01", "0.05", "0.5", "0.999999"]))
    if rng.random() < 0.7:
        lines.append("min_steps = " + _toml_number(rng, ["2", "3", "5", "50", "1000000"]))
    if rng.random() < 0.5:
        lines.append("weak = " + rng.choice(('"pass"', '"fail"', '"maybe"', "true")))
    if rng.random() < 0.3:
        lines.append("benchmark_prefix = " + json.dumps(rng.choice(("", "x" * 5000, "a/b", "<script>", "\u202e"))))
    for metric in rng.sample(METRICS, rng.randint(0, len(METRICS))):
        lines.append(f"[metrics.{metric}]")
        if rng.random() < 0.8:
            lines.append("threshold = " + _toml_number(rng, ["0.05", "0.1", "0.5", "2"]))
        if rng.random() < 0.5:
            lines.append("enabled = " + rng.choice(("true", "false", '"no"')))
    return ("\n".join(lines) + "\n").encode()


PRICE_CONFIG = b"""[prices]
usd_per_gpu_hour = 2.10
[prices.gpus]
"A100 80GB" = 1.80
"NVIDIA H100 80GB HBM3" = 3.5
[energy]
grid_kg_co2_per_kwh = 0.25
"""
PRICE_TEXT = ("2.5", "0", "-1", "nan", "inf", "1e400", "1e6", "1000001", "", " ", "abc", "1,5", "0x10", "1e-320",
              "9" * 5000, "\u202e7", "+3", "3e", "Infinity")


def price_text(rng: random.Random) -> str:
    """A value for GPUSCOPE_USD_PER_GPU_HOUR or GPUSCOPE_GRID_KG_CO2_PER_KWH as someone might set it."""
    if rng.random() < 0.6:
        return rng.choice(PRICE_TEXT)
    return repr(rng.choice((rng.uniform(-1e3, 1e7), rng.uniform(0, 10), float(f"1e{rng.randint(-330, 330)}"))))


def price_number(rng: random.Random) -> float:
    """A value for --usd-per-gpu-hour after the command line parsed it as a float."""
    return rng.choice((0.0, -0.0, 2.5, 1e6, 1e6 + 1, 1e308, math.inf, math.nan, 5e-324, rng.uniform(0, 100),
                       float(f"1e{rng.randint(-330, 330)}")))
