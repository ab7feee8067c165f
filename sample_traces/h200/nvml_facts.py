"""Dump what NVML says about this machine's GPUs, raw, call by call: values or the error each call raised."""
import json, sys, time
import pynvml as n

out = {"binding_version": getattr(n, "__version__", None), "constants": {}}
for k in dir(n):
    if k.startswith(("NVML_NVLINK_VERSION", "NVML_TOPOLOGY_", "NVML_DEVICE_MIG", "NVML_GPU_INSTANCE_PROFILE_",
                     "NVML_COMPUTE_INSTANCE_PROFILE_", "NVML_NVLINK_MAX")):
        v = getattr(n, k)
        if isinstance(v, int):
            out["constants"][k] = v

def call(f, *a):
    try:
        r = getattr(n, f)(*a)
        if isinstance(r, bytes):
            r = r.decode()
        if hasattr(r, "_fields_"):
            r = {name: (getattr(r, name).decode() if isinstance(getattr(r, name), bytes) else
                        getattr(r, name) if isinstance(getattr(r, name), (int, float, str)) else str(getattr(r, name)))
                 for name, *_ in r._fields_}
        elif isinstance(r, (list, tuple)):
            r = [x if isinstance(x, (int, float, str)) else
                 ({nm: getattr(x, nm) for nm, *_ in x._fields_} if hasattr(x, "_fields_") else str(x)) for x in r]
        return {"ok": r}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}

n.nvmlInit()
out["driver"] = call("nvmlSystemGetDriverVersion")
out["nvml_version"] = call("nvmlSystemGetNVMLVersion")
out["cuda_driver"] = call("nvmlSystemGetCudaDriverVersion_v2")
cnt = n.nvmlDeviceGetCount()
out["count"] = cnt
out["devices"] = []
for i in range(cnt):
    h = n.nvmlDeviceGetHandleByIndex(i)
    d = {}
    for f in ["nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetEnforcedPowerLimit",
              "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetCurrPcieLinkGeneration",
              "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
              "nvmlDeviceGetGpuMaxPcieLinkGeneration", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
              "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetVirtualizationMode", "nvmlDeviceGetComputeMode",
              "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetUtilizationRates",
              "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons",
              "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetPciInfo", "nvmlDeviceGetBoardPartNumber",
              "nvmlDeviceGetSerial", "nvmlDeviceGetBrand", "nvmlDeviceGetArchitecture", "nvmlDeviceGetNumGpuCores",
              "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetGpcClkVfOffset", "nvmlDeviceGetPcieLinkMaxSpeed",
              "nvmlDeviceGetPcieSpeed", "nvmlDeviceGetAccountingMode", "nvmlDeviceGetPersistenceMode",
              "nvmlDeviceGetNumaNodeId", "nvmlGpmQueryDeviceSupport", "nvmlDeviceGetGspFirmwareMode"]:
        if hasattr(n, f):
            d[f] = call(f, h)
    d["clock_sm"] = call("nvmlDeviceGetClockInfo", h, n.NVML_CLOCK_SM)
    d["max_clock_sm"] = call("nvmlDeviceGetMaxClockInfo", h, n.NVML_CLOCK_SM)
    d["pcie_tx"] = call("nvmlDeviceGetPcieThroughput", h, n.NVML_PCIE_UTIL_TX_BYTES)
    d["process_util"] = call("nvmlDeviceGetProcessUtilization", h, int(time.time() * 1e6) - 2_000_000)
    links = []
    for l in range(int(getattr(n, "NVML_NVLINK_MAX_LINKS", 18))):
        links.append({"link": l, "state": call("nvmlDeviceGetNvLinkState", h, l),
                      "version": call("nvmlDeviceGetNvLinkVersion", h, l),
                      "remote_type": call("nvmlDeviceGetNvLinkRemoteDeviceType", h, l) if hasattr(n, "nvmlDeviceGetNvLinkRemoteDeviceType") else None,
                      "remote_pci": call("nvmlDeviceGetNvLinkRemotePciInfo_v2", h, l) if hasattr(n, "nvmlDeviceGetNvLinkRemotePciInfo_v2") else None})
    d["nvlink"] = links
    fields = []
    for name in ["NVML_FI_DEV_NVLINK_LINK_COUNT", "NVML_FI_DEV_NVLINK_GET_SPEED", "NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON",
                 "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX", "NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX",
                 "NVML_FI_DEV_NVLINK_GET_VERSION", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES"]:
        if hasattr(n, name):
            try:
                v = n.nvmlDeviceGetFieldValues(h, [(getattr(n, name), 0xFFFFFFFF)] if "THROUGHPUT" in name else [getattr(n, name)])[0]
                fields.append({"field": name, "ret": v.nvmlReturn, "ull": v.value.ullVal, "ui": v.value.uiVal})
            except Exception as e:
                fields.append({"field": name, "error": f"{type(e).__name__}: {e}"})
    d["fields"] = fields
    out["devices"].append(d)
n.nvmlShutdown()
json.dump(out, open(sys.argv[1], "w"), indent=1, default=str)
print("nvml facts ok", cnt)
