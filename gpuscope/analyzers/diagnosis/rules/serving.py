"""Advice that fits a server: an inference trace gets serving terms, never training-only advice.

A rank whose trace ran no backward and no optimizer (analyzers/trace/workload.py) is served, not trained. Decode
steps that keep the GPU under half busy with no graph replay (``serving.phases``) are told to replay as graphs. Its
per-request host work is spread by batching requests on the server, not by a larger training batch; a
small model dominated by launch overhead gains from an inference compiler; an under-used GPU can be
shared. Learning-rate, optimizer, gradient and DDP advice is dropped. The serving wording of shared advice
(batching, graphs, syncs, memory, precision) is here; the rule that gives the advice picks it.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.analyzers.advice.vendor import Words
from gpuscope.analyzers.diagnosis import codes, savings
from gpuscope.analyzers.diagnosis.context import Context, RuleOutput
from gpuscope.analyzers.serving.report import HOST_BOUND_BUSY, job_phases
from gpuscope.model.diagnosis import Recommendation

TRAINING_ONLY = frozenset({codes.FUSED_OPTIMIZER, codes.FOREACH_OPTIMIZER, codes.GRAD_ACCUMULATION,
                           codes.GRADIENT_COMPRESSION, codes.DDP_BUCKET, codes.NCCL_BACKEND})
"""Recommendations about gradients, optimizers and DDP's gradient all-reduce."""
SHARE_BUSY_MAX = 0.3
"""An inference GPU busy under 30% of the time is a candidate for sharing (MIG, MPS, time-slicing)."""
QUANTIZE_MIN = 0.3
"""Matrix-vector kernels holding 30% of kernel time make weight-only quantisation worth it."""
COMPILER_SHORT_MIN = 0.6
COMPILER_HOST_MIN = 0.3
DECODE_SHARE_MIN = 0.05
"""Decode steps must hold at least this share of the steps' time for their launch overhead to matter."""

BATCHING = ("Batch requests on the server so the fixed per-request host work (Python, launches) is spread over "
             "more samples: dynamic batching in Triton Inference Server (dynamic_batching { max_queue_delay_"
             "microseconds, preferred_batch_size }), TorchServe (batch_size and max_batch_delay when registering "
             "the model), continuous batching in vLLM (raise max_num_seqs / max_num_batched_tokens) or SGLang "
             "(--max-running-requests).")
SYNCS = ("Keep intermediate results on the GPU: avoid .item()/.cpu() and torch.cuda.synchronize() inside the forward "
         "pass, and copy each batch's outputs back once, with non_blocking copies into pinned buffers.")
MEMORY = ("serve in bf16/fp16 or quantise the weights (int8/fp8: TensorRT, vLLM --quantization), and cap what the "
          "server reserves for batches and the KV cache (vLLM gpu_memory_utilization and max_num_seqs, SGLang "
          "--mem-fraction-static) before requests fail with out-of-memory errors.")
AUTOCAST = ("Cast the model for serving (model.to(torch.bfloat16), or fp16 on GPUs without bf16) or run it under "
            "torch.autocast; no loss scaling is needed without a backward pass.")


_COMPILERS = {
    "nvidia": ("TensorRT", "Build a TensorRT engine (torch_tensorrt.compile, or TensorRT-LLM for LLMs) or export to "
                           "ONNX Runtime with the CUDA/TensorRT execution provider"),
    "amd": ("MIGraphX", "Compile it with MIGraphX (torch_migraphx, or the migraphx-driver on an ONNX export) or run "
                        "it in ONNX Runtime with the MIGraphX/ROCm execution provider"),
}
_SHARING = {
    "nvidia": ("MIG partitions (A100/H100/H200/B200) give each a slice with its own memory, MPS or Kubernetes "
               "time-slicing (nvidia-device-plugin sharing.timeSlicing) share a whole GPU.", "MIG, MPS, time-slicing"),
    "amd": ("MI300-class GPUs split into compute partitions (amd-smi set --compute-partition CPX, with NPS4 memory "
            "partitions) that serve one replica each; or run the replicas as processes that share the whole GPU.",
            "compute partitions, shared processes"),
}


def graphs(w: Words) -> str:
    """Graph replay for a server, in the vendor's words (vLLM and SGLang keep their CUDA-named flags on ROCm)."""
    return (f"Replay the forward pass as {w.graphs}: torch.compile(model, mode='reduce-overhead') for a static-shape "
            "model; vLLM and SGLang capture decode graphs unless told not to (drop enforce_eager / "
            "--disable-cuda-graph), and the capture sizes should cover the batch sizes served.")


def apply(ctx: Context) -> RuleOutput:
    if not ctx.inference or ctx.no_gpu:
        return RuleOutput()
    recs: list[Recommendation] = []
    host = ctx.shares.get("host_overhead")
    short = ctx.mean(lambda r: r.launch.short_kernel_share if r.launch else None)
    graphed = ctx.mean_ev(lambda e: e.graph_kernel_share) or 0.0
    if short is not None and short >= COMPILER_SHORT_MIN and host >= COMPILER_HOST_MIN:
        s = savings.share_of(host, 0.5, "Host time the GPU waits for", "an inference engine fuses layers and "
                             "launches the network as a few large kernels")
        engine, how = _COMPILERS[ctx.words.vendor]
        recs.append(Recommendation(
            codes.INFERENCE_COMPILER, f"Compile the model for inference ({engine}, ONNX Runtime)",
            f"{short:.0%} of kernels run under 10 µs and the GPU waits on the host {host:.0%} of the time: a small "
            f"model dominated by launch overhead. {how}"
            + (f", or capture it in {ctx.words.graphs}." if graphed < 0.5 else "."),
            s.fraction, s.reasoning, stage="host_overhead"))
    gemv = ctx.mean(lambda r: sum(k.share for k in r.top_kernels if _memory_bound_kernel(k.name)) or None)
    kernel = ctx.shares.get("gpu_compute")
    if gemv is not None and gemv >= QUANTIZE_MIN and kernel > 0:
        fraction = kernel * gemv * 0.5
        recs.append(Recommendation(
            codes.QUANTIZE_WEIGHTS, "Quantise the weights (int8/fp8/int4)",
            f"{gemv:.0%} of kernel time is in matrix-vector products (decode-style GEMV), which read every weight "
            "for few results: memory-bound. Weight-only quantisation halves (int8/fp8) or quarters (int4) the "
            "bytes read: vLLM --quantization fp8/awq/gptq, "
            + ("" if ctx.vendor == "amd" else "TensorRT-LLM's weight-only quantisation, ")
            + "torchao's int8_weight_only.", fraction,
            f"GPU compute is {kernel:.1%} of the step and {gemv:.0%} of it is GEMV; memory-bound time scales with "
            f"the bytes read, so int8 weights give back about half of it: {fraction:.1%}.", stage="gpu_compute"))
    busy = ctx.facts.gpu_busy
    side = ctx.shares.details.get("gpu_side_wait_share", 0.0)
    # A GPU idle mostly with work queued may be busy with what the trace does not show: not free to share.
    if busy is not None and busy < SHARE_BUSY_MAX and side < (1 - busy) / 2:
        how, partitions = _SHARING[ctx.words.vendor]
        recs.append(Recommendation(
            codes.SHARE_GPU, f"Share the GPU between services ({partitions})",
            f"The GPU is busy only {busy:.0%} of the time serving this model. Run several replicas or models on it: "
            f"{how}", None, "Frees GPUs rather than time: the GPU-hours no longer needed are what it saves.",
            stage="idle"))
    decode = _decode_graphs(ctx)
    recs.extend([decode] if decode is not None else [])
    return RuleOutput((), tuple(recs))


def _decode_graphs(ctx: Context) -> Recommendation | None:
    """Decode steps launch-bound (the GPU busy under half of them) and run without graph replays: capture them."""
    decode = job_phases(ctx.ranks)[0].get("decode")
    graphed = any(r.serving is not None and r.serving.graphs for r in ctx.ranks)
    if decode is None or graphed or decode.gpu_busy is None or decode.gpu_busy >= HOST_BOUND_BUSY \
            or decode.bottleneck != "host" or decode.share < DECODE_SHARE_MIN:
        return None
    waiting = decode.share * (1 - decode.gpu_busy)
    s = savings.share_of(waiting, 0.5, "Decode time the GPU waits for the host", "a graph replay launches a "
                         "decode step's kernels at once, but the scheduler's Python between steps stays")
    return Recommendation(
        codes.DECODE_CUDA_GRAPHS, f"Replay the decode steps as {ctx.words.graphs}",
        f"Decode steps take {decode.share:.0%} of the serving time and keep the GPU busy only {decode.gpu_busy:.0%} "
        f"of it (serving.phases.decode.gpu_busy), with no graph replay in the trace: each token's forward is "
        f"launched kernel by kernel. {graphs(ctx.words)}", s.fraction, s.reasoning, stage="host_overhead")


def adapt(ctx: Context, recs: Sequence[Recommendation]) -> tuple[Recommendation, ...]:
    """An inference run's recommendations without the training-only ones (the rules word the rest for serving), and
    without the generic ``cuda_graphs`` where ``decode_cuda_graphs`` says it of the decode steps."""
    if not ctx.inference:
        return tuple(recs)
    decode = any(r.code == codes.DECODE_CUDA_GRAPHS for r in recs)
    return tuple(r for r in recs if r.code not in TRAINING_ONLY and not (decode and r.code == codes.CUDA_GRAPHS))


def _memory_bound_kernel(name: str) -> bool:
    """cuBLAS/rocBLAS GEMV and the GEMV kernels of LLM decode (``gemv``, ``gemvx``, ``dot_kernel``...)."""
    lower = name.lower()
    return "gemv" in lower
