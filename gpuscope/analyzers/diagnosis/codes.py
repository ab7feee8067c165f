"""Every finding and recommendation code, named once: gates, tests and docs key on these strings, so they are
stable; a rule uses the constant, never the literal. docs/diagnosis.md says what each one means."""

from __future__ import annotations

# Findings: what the analysis noticed.
CLOCK_SKEW = "clock_skew"
COMM_EXPOSED_HIGH = "comm_exposed_high"
COMM_LATENCY_BOUND = "comm_latency_bound"
COMM_LINK_BOUND = "comm_link_bound"
COMM_TOPOLOGY = "comm_topology"
DATA_PARALLEL = "data_parallel"
DATALOADER_SHARE_HIGH = "dataloader_share_high"
DDP_NOT_NCCL = "ddp_not_nccl"
DRAM_BOUND = "dram_bound"
GPU_BUSY_HIGH = "gpu_busy_high"
GPU_GAP_LONG = "gpu_gap_long"
GPU_IDLE = "gpu_idle"
GPU_SIDE_WAIT = "gpu_side_wait"
GPU_UTIL_LOW = "gpu_util_low"
GPU_UTIL_LOW_CHUNKS = "gpu_util_low_chunks"
HOST_WAIT_IDLE = "host_wait_idle"
LOADER_CPU_BOUND = "loader_cpu_bound"
LOADER_IO_WAIT = "loader_io_wait"
MEMORY_HEADROOM = "memory_headroom"
MEMORY_NEAR_CAPACITY = "memory_near_capacity"
SHARED_GPU_CONTENTION = "shared_gpu_contention"
PAGEABLE_MEMCPY = "pageable_memcpy"
SHORT_KERNELS = "short_kernels"
STARTUP_IN_TRACE = "startup_in_trace"
STEP_OUTLIERS = "step_outliers"
STRAGGLER = "straggler"
SYNC_CALLS = "sync_calls"
SYNC_MEMCPY = "sync_memcpy"
TENSOR_CORES_UNUSED = "tensor_cores_unused"
TENSOR_PIPE_IDLE = "tensor_pipe_idle"

# Recommendations: what to change (a finding and a recommendation may share a name, e.g. straggler).
ACTIVATION_CHECKPOINTING = "activation_checkpointing"
AMP = "amp"
ASYNC_CHECKPOINT = "async_checkpoint"
ASYNC_COPIES = "async_copies"
BUCKET_COLLECTIVES = "bucket_collectives"
CUDA_GRAPHS = "cuda_graphs"
DECODE_CUDA_GRAPHS = "decode_cuda_graphs"
DATALOADER_NUM_WORKERS = "dataloader_num_workers"
DATALOADER_PREFETCH = "dataloader_prefetch"
DDP_BUCKET = "ddp_bucket"
DYNAMIC_BATCHING = "dynamic_batching"
FASTER_LOADING = "faster_loading"
FIND_GPU_WAIT = "find_gpu_wait"
FEWER_COMM_BYTES = "fewer_comm_bytes"
FOREACH_OPTIMIZER = "foreach_optimizer"
FUSE_KERNELS = "fuse_kernels"
FUSED_OPTIMIZER = "fused_optimizer"
GPU_DECODE = "gpu_decode"
GPU_PLACEMENT = "gpu_placement"
GRAD_ACCUMULATION = "grad_accumulation"
GRADIENT_COMPRESSION = "gradient_compression"
HOST_HOTSPOT = "host_hotspot"
INFERENCE_COMPILER = "inference_compiler"
ISOLATE_GPU = "isolate_gpu"
LARGER_BATCH = "larger_batch"
MIG_SLICE = "mig_slice"
NCCL_BACKEND = "nccl_backend"
PERSISTENT_WORKERS = "persistent_workers"
PIN_MEMORY = "pin_memory"
PROFILER_SCHEDULE = "profiler_schedule"
QUANTIZE_WEIGHTS = "quantize_weights"
REDUCE_MEMORY_TRAFFIC = "reduce_memory_traffic"
RELEASE_IDLE_GPU = "release_idle_gpu"
REMOVE_SYNCS = "remove_syncs"
RIGHT_SIZE = "right_size"
SERVING_MEMORY = "serving_memory"
SERVING_KV_BOUND = "serving_kv_bound"
SERVING_OVERPROVISIONED = "serving_overprovisioned"
SERVING_UNDER_BATCHED = "serving_under_batched"
SHARE_GPU = "share_gpu"
SMOOTH_STEPS = "smooth_steps"
STORAGE_FORMAT = "storage_format"
TF32 = "tf32"
USE_DDP = "use_ddp"

FINDINGS = frozenset({
    CLOCK_SKEW, COMM_EXPOSED_HIGH, COMM_LATENCY_BOUND, COMM_LINK_BOUND, COMM_TOPOLOGY, DATA_PARALLEL,
    DATALOADER_SHARE_HIGH, DDP_NOT_NCCL, DRAM_BOUND, GPU_BUSY_HIGH, GPU_GAP_LONG, GPU_IDLE, GPU_SIDE_WAIT,
    GPU_UTIL_LOW,
    GPU_UTIL_LOW_CHUNKS, HOST_WAIT_IDLE, LOADER_CPU_BOUND, LOADER_IO_WAIT, MEMORY_HEADROOM, MEMORY_NEAR_CAPACITY,
    PAGEABLE_MEMCPY, SHARED_GPU_CONTENTION, SHORT_KERNELS, STARTUP_IN_TRACE, STEP_OUTLIERS, STRAGGLER,
    SYNC_CALLS, SYNC_MEMCPY, TENSOR_CORES_UNUSED, TENSOR_PIPE_IDLE
})
RECOMMENDATIONS = frozenset({
    ACTIVATION_CHECKPOINTING, AMP, ASYNC_CHECKPOINT, ASYNC_COPIES, BUCKET_COLLECTIVES, CUDA_GRAPHS,
    DATALOADER_NUM_WORKERS, DATALOADER_PREFETCH, DDP_BUCKET, DYNAMIC_BATCHING, FASTER_LOADING, FEWER_COMM_BYTES,
    FIND_GPU_WAIT,
    FOREACH_OPTIMIZER, FUSE_KERNELS, FUSED_OPTIMIZER, GPU_DECODE, GPU_PLACEMENT, GRAD_ACCUMULATION,
    GRADIENT_COMPRESSION, HOST_HOTSPOT, INFERENCE_COMPILER, ISOLATE_GPU, LARGER_BATCH, MIG_SLICE, NCCL_BACKEND,
    PERSISTENT_WORKERS,
    PIN_MEMORY, PROFILER_SCHEDULE, QUANTIZE_WEIGHTS, REDUCE_MEMORY_TRAFFIC, RELEASE_IDLE_GPU, REMOVE_SYNCS,
    RIGHT_SIZE, SERVING_MEMORY, SHARE_GPU, SMOOTH_STEPS, STORAGE_FORMAT, STRAGGLER, TF32, USE_DDP,
    DECODE_CUDA_GRAPHS, SERVING_KV_BOUND, SERVING_OVERPROVISIONED, SERVING_UNDER_BATCHED,
})
