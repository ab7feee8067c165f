"""Join the two parts TraceLens cut from one SGLang profile back into one trace.

AMD-AGI/TraceLens keeps, under tests/traces/inference/, two files cut by its step splitter from one torch-profiler
trace of an SGLang server (the same ``trace_id`` and ``traceName``, one clock): ``sglang_prefilldecode/
sglang_Qwen3-8B_prefilldecode.json.gz`` holds an EXTEND (prefill) step, ``sglang_decode/sglang_Qwen3-8B_decode.json.gz``
the DECODE step that followed it, a HIP-graph replay. This writes their events into one file, in time order, each
event once (metadata events the two share are kept once); nothing else is changed.

    python sample_traces/serving/merge_sglang.py PREFILL.json.gz DECODE.json.gz OUT.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys


def main(prefill: str, decode: str, out: str) -> None:
    parts = [json.load(gzip.open(path)) for path in (prefill, decode)]
    first, second = parts
    if first.get("trace_id") != second.get("trace_id"):
        raise SystemExit("the two files are not parts of one trace (their trace_id differ)")
    seen: set[str] = set()
    events = []
    for part in parts:
        for event in part["traceEvents"]:
            key = json.dumps(event, sort_keys=True)
            if key not in seen:
                seen.add(key)
                events.append(event)
    events.sort(key=lambda e: (e.get("ph") != "M", e.get("ts", 0)))
    merged = {k: v for k, v in first.items() if k != "traceEvents"}
    merged["traceEvents"] = events
    with gzip.open(out, "wt", compresslevel=9) as f:
        json.dump(merged, f, separators=(",", ":"))


if __name__ == "__main__":
    main(*sys.argv[1:4])
