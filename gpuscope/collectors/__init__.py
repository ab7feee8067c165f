"""Live samplers behind one seam (NVML, DCGM scraped from dcgm-exporter, host counters from psutil, py-spy stacks,
replay) and the loop that drives them into the store."""
