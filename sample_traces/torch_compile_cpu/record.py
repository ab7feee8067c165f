"""Record a profiler trace of a torch.compile'd module's first calls on the CPU (the compilation inside it).

    python sample_traces/torch_compile_cpu/record.py OUT.json && gzip OUT.json
"""

import sys

import torch

model = torch.compile(torch.nn.Linear(64, 64), backend="eager")
x = torch.randn(8, 64)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    for _ in range(3):
        model(x)
        prof.step()
prof.export_chrome_trace(sys.argv[1])
