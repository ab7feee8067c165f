"""Serving: an inference server's throughput, load, latency and cost per token from its own metrics (live or from
the fleet's Prometheus), the prefill and decode steps of its traces, its CUDA/HIP graph replays, and the advice a
serving team acts on."""
