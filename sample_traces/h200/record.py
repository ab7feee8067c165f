"""Small training and serving loops whose bottleneck is known by construction, profiled with gpuscope.torch.

python record.py VARIANT OUT_DIR [--under-run]   (gpuscope on PYTHONPATH)
Each run writes a Kineto trace (6 active steps after 5 skipped and 2 warm-up) and OUT_DIR/VARIANT.meta.json with
what the loop itself measured, independently of any trace analysis: wall time per step and the time the loop was
blocked waiting for its next batch (time.perf_counter around next()), plus the configuration.
"""
import json, os, sys, time
import numpy as np
import torch
import torch.nn as nn

import gpuscope.torch as gt

variant, out = sys.argv[1], sys.argv[2]
under_run = "--under-run" in sys.argv
torch.backends.cudnn.benchmark = True
dev = os.environ.get("DEV", "cuda")
STEPS = 5 + 2 + 6 + 2


class Images(torch.utils.data.Dataset):
    """Random uint8 images decoded-and-augmented on the CPU: crop, flip, normalise, plus `extra` passes of a
    3x3 box blur in numpy (stands in for JPEG decode and heavy augmentation)."""

    def __init__(self, n, size, extra):
        self.n, self.size, self.extra = n, size, extra
        self.pool = np.random.default_rng(0).integers(0, 255, (16, size + 32, size + 32, 3), dtype=np.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng(i)
        img = self.pool[i % 16]
        y, x = rng.integers(0, 32, 2)
        a = img[y:y + self.size, x:x + self.size].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            a = a[:, ::-1]
        for _ in range(self.extra):
            a = (a + np.roll(a, 1, 0) + np.roll(a, 1, 1)) / 3.0
        a = (a - 0.45) / 0.225
        return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1))), int(i % 1000)


def vision(workers, extra, batch, arch):
    import torchvision
    model = getattr(torchvision.models, arch)().to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = torch.utils.data.DataLoader(Images(batch * STEPS, 224, extra), batch_size=batch, num_workers=workers,
                                         pin_memory=workers > 0, persistent_workers=workers > 0,
                                         prefetch_factor=4 if workers else None)
    def step(batch_):
        x, y = batch_
        x = x.to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        y = y.to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return loader, step, {"arch": arch, "batch": batch, "num_workers": workers, "aug_extra_passes": extra,
                          "amp": "bf16", "channels_last": True, "optimizer": "SGD(momentum=0.9)"}


def launch_bound():
    """A deep, narrow MLP at batch 16 with Adam(foreach=False): thousands of tiny kernels a step."""
    layers = []
    for _ in range(48):
        layers += [nn.Linear(256, 256), nn.LayerNorm(256), nn.GELU()]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    data = [(torch.randn(16, 256, device=dev), torch.randn(16, 256, device=dev)) for _ in range(STEPS)]
    def step(b):
        x, y = b
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return data, step, {"model": "MLP 48x(Linear 256, LayerNorm, GELU)", "batch": 16, "optimizer": "Adam(foreach=False)"}


def sync_bound():
    """A mid-size MLP that reads its loss and every layer's activation norm with .item() each step."""
    model = nn.Sequential(*[nn.Sequential(nn.Linear(2048, 2048), nn.ReLU()) for _ in range(12)]).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = [(torch.randn(256, 2048, device=dev), torch.randn(256, 2048, device=dev)) for _ in range(STEPS)]
    stats = []
    def step(b):
        x, y = b
        h = x
        for layer in model:
            h = layer(h)
            stats.append(h.norm().item())
        loss = nn.functional.mse_loss(h, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stats.append(loss.item())
    return data, step, {"model": "MLP 12x(Linear 2048, ReLU)", "batch": 256, "syncs": "13 .item() per step",
                        "optimizer": "AdamW(fused=True)"}


def pageable_copies():
    """Each step copies a 512 MiB pageable host tensor to the GPU before a small amount of compute."""
    model = nn.Linear(4096, 4096).to(dev)
    host = [torch.randn(128 * 2**20 // 4 * 4 // 4, dtype=torch.float32) for _ in range(2)]
    data = list(range(STEPS))
    def step(i):
        big = host[i % 2].to(dev)
        z = model(big[: 4096 * 64].view(64 * 4096 // 4096, 4096).repeat(8, 1))
        z.sum().backward()
    return data, step, {"model": "Linear 4096", "h2d_bytes_per_step": 128 * 2**20, "pinned": False}


def gpu_bound():
    """A bf16 transformer encoder at a large batch: the GPU is the bottleneck."""
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True, norm_first=True),
                                  12).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    data = [torch.randn(32, 512, 1024, device=dev) for _ in range(STEPS)]
    def step(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return data, step, {"model": "TransformerEncoder 12 x d1024 h16 ff4096", "batch": 32, "seq": 512, "amp": "bf16",
                        "optimizer": "AdamW(fused=True)"}


def decode():
    """Serving: a batch-4 greedy decode loop over a small GPT-like stack, one token per step, no graphs."""
    model = nn.TransformerEncoder(nn.TransformerEncoderLayer(2048, 16, 8192, batch_first=True), 8).to(dev).eval()
    data = list(range(STEPS))
    x = torch.randn(4, 1, 2048, device=dev, dtype=torch.bfloat16)
    model = model.to(torch.bfloat16)
    def step(_):
        with torch.inference_mode():
            model(x)
    return data, step, {"model": "8 x d2048 encoder layers, bf16", "batch": 4, "tokens_per_step": 1,
                        "workload": "inference"}


builders = {
    "resnet50_workers0": lambda: vision(0, 6, 128, "resnet50"),
    "resnet50_workers12": lambda: vision(12, 6, 128, "resnet50"),
    "resnet50_workers12_b": lambda: vision(12, 6, 128, "resnet50"),
    "mlp_launch_bound": launch_bound, "mlp_item_syncs": sync_bound, "pageable_h2d": pageable_copies,
    "transformer_bf16": gpu_bound, "decode_bs4": decode,
}
data, step, config = builders[variant]()
waits, walls = [], []
trace_path = None if under_run else os.path.join(out, variant)
it = iter(gt.profile_steps(data, skip_first=5, warmup=2, active=6, path=trace_path, record_shapes=True))
t_prev = time.perf_counter()
while True:
    t0 = time.perf_counter()
    try:
        b = next(it)
    except StopIteration:
        break
    t1 = time.perf_counter()
    step(b)
    waits.append(t1 - t0)
    walls.append(t1 - t_prev)
    t_prev = t1
torch.cuda.synchronize() if dev == "cuda" else None
active = slice(7, 13)  # the recorded steps
meta = {"variant": variant, "config": config, "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "measured_by_the_loop": {
            "wall_s_per_step": walls, "data_wait_s_per_step": waits,
            "active_steps": [7, 13], "note": "wall_s[i] is from the end of data fetch i-1 to the end of fetch i"}}
os.makedirs(out, exist_ok=True)
json.dump(meta, open(os.path.join(out, f"{variant}.meta.json"), "w"), indent=1)
print(variant, "steps", len(walls), "median wall ms", 1e3 * float(np.median(walls[7:13])),
      "median data wait ms", 1e3 * float(np.median(waits[7:13])))
