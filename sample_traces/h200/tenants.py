"""Two processes share one GPU: a heavy bf16 matmul loop and a light one with sleeps. Sample NVML's device and
per-process utilisation and memory every 0.5 s while both run; write the raw series as JSON."""
import json, os, subprocess, sys, time
import pynvml as n

WORK = r'''
import sys, time, torch
mode, seconds = sys.argv[1], float(sys.argv[2])
x = torch.randn(8192 if mode == "heavy" else 2048, 8192 if mode == "heavy" else 2048, device="cuda", dtype=torch.bfloat16)
keep = torch.empty(int((20 if mode == "heavy" else 6) * 2**30) // 2, device="cuda", dtype=torch.bfloat16)
end = time.time() + seconds
while time.time() < end:
    for _ in range(4):
        y = x @ x
    torch.cuda.synchronize()
    if mode == "light":
        time.sleep(0.03)
'''
secs = 14.0
procs = {m: subprocess.Popen([sys.executable, "-c", WORK, m, str(secs)]) for m in ("heavy", "light")}
n.nvmlInit()
h = n.nvmlDeviceGetHandleByIndex(0)
series = []
last = int(time.time() * 1e6) - 1_000_000
t0 = time.time()
while time.time() - t0 < secs + 6 and any(p.poll() is None for p in procs.values()):
    time.sleep(0.5)
    now = int(time.time() * 1e6)
    tick = {"t_us": now, "pids": {m: p.pid for m, p in procs.items()}}
    try:
        u = n.nvmlDeviceGetUtilizationRates(h); tick["gpu_util"] = u.gpu; tick["mem_util"] = u.memory
    except Exception as e:
        tick["gpu_util_error"] = repr(e)
    try:
        tick["mem_used"] = n.nvmlDeviceGetMemoryInfo(h).used
    except Exception as e:
        tick["mem_error"] = repr(e)
    try:
        tick["procs"] = [{"pid": p.pid, "used": p.usedGpuMemory} for p in n.nvmlDeviceGetComputeRunningProcesses(h)]
    except Exception as e:
        tick["procs_error"] = repr(e)
    try:
        tick["putil"] = [{"pid": s.pid, "ts": s.timeStamp, "sm": s.smUtil, "mem": s.memUtil, "enc": s.encUtil,
                          "dec": s.decUtil} for s in n.nvmlDeviceGetProcessUtilization(h, last)]
    except Exception as e:
        tick["putil_error"] = f"{type(e).__name__}: {e}"
    if hasattr(n, "nvmlDeviceGetProcessesUtilizationInfo"):
        try:
            info = n.c_nvmlProcessesUtilizationInfo_t()
            info.version = n.nvmlProcessesUtilizationInfo_v1
            info.lastSeenTimeStamp = last
            r = n.nvmlDeviceGetProcessesUtilizationInfo(h, info)
            tick["putil_v2"] = str(r)[:2000]
        except Exception as e:
            tick["putil_v2_error"] = f"{type(e).__name__}: {e}"
    last = now
    series.append(tick)
for p in procs.values():
    p.wait(timeout=30)
n.nvmlShutdown()
json.dump({"host_pids_visible": True, "series": series}, open(sys.argv[1], "w"), indent=1)
print("tenants ok", len(series))
