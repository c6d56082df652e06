"""PyTorch twin of bench/train_step.cpp: same model, batch, data shape, loss,
optimizer and method, on the CPU or a GPU; prints the same line with "torch"
in front.  On CUDA, TF32 follows --tf32 for both cuBLAS and cuDNN, cudnn
benchmark is on (as in loom's run), and peak_mib is
torch.cuda.max_memory_allocated over the timed steps.  --amp bf16|fp16 runs
the forward and the loss under torch.autocast (the line ends with amp=...);
fp16 also scales the loss with torch.cuda.amp.GradScaler.
--channels-last puts the model and input in torch.channels_last (the line
ends with channels_last=1).
--profile runs the timed steps under PyTorch's profiler and prints, after the
line, each phase's time and the ops above 0.5% of the step by self CPU time
(on CUDA: by self GPU time), in ms per step (beside bench/train_step
--profile's kernel table)."""
import argparse
import contextlib
import os
import resource
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "pyloom"))
from loom_torch import make_model  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="convnet")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tf32", default="true", choices=["true", "false", "1", "0"])
    ap.add_argument("--amp", default="none", choices=["none", "bf16", "fp16"])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--channels-last", action="store_true",
                    help="model and input in torch.channels_last (PyTorch's default is NCHW)")
    a = ap.parse_args()
    tf32 = a.tf32 in ("true", "1")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cudnn.benchmark = True
    model = make_model(a.model, a.classes).to(device)
    channels = 1 if a.model == "convnet" else 3
    x = torch.randn(a.batch, channels, a.size, a.size).to(device)
    if a.channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "fp16")
    ms = []

    def faults():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_minflt + u.ru_majflt

    faults_at_warmup = 0
    prof = None
    for i in range(a.warmup + a.iters):
        if i == a.warmup:
            faults_at_warmup = faults()
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            if a.profile:
                activities = [torch.profiler.ProfilerActivity.CPU]
                if cuda:
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                prof = torch.profiler.profile(activities=activities)
                prof.__enter__()
        phase = (lambda name: torch.autograd.profiler.record_function(name)) if prof else (
            lambda name: contextlib.nullcontext())
        t0 = time.perf_counter()
        with phase("optimizer"):
            opt.zero_grad()
        region = contextlib.nullcontext() if a.amp == "none" else torch.autocast(
            device.type, dtype=torch.bfloat16 if a.amp == "bf16" else torch.float16)
        with phase("forward"), region:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with phase("backward"):
            scaler.scale(loss).backward()
        with phase("optimizer"):
            scaler.step(opt)
            scaler.update()
        loss.item()
        t1 = time.perf_counter()
        if i >= a.warmup:
            ms.append((t1 - t0) * 1000)
    median = statistics.median(ms)
    faults_per_step = (faults() - faults_at_warmup) / a.iters
    # PyTorch keeps no statistics of CPU memory: peak_mib is 0 there.
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if cuda else 0.0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("torch %s device=%s batch=%d size=%d threads=%d tf32=%d ms_per_step=%.2f mean=%.2f "
          "images_per_s=%.1f peak_mib=%.1f faults_per_step=%.0f rss_mib=%.0f%s" % (
              a.model, a.device, a.batch, a.size, a.threads, int(tf32), median,
              statistics.mean(ms), a.batch * 1000.0 / median, peak, faults_per_step, rss_mib,
              "" if a.amp == "none" else " amp=" + a.amp) + (" channels_last=1" if a.channels_last else ""))
    if prof:
        prof.__exit__(None, None, None)
        print_profile(prof, a.iters, statistics.mean(ms), cuda)


def self_time_us(event, on_gpu):
    """An op's self time: CPU, or on a GPU the device time of its kernels
    (self_device_time_total since PyTorch 2.4, self_cuda_time_total before)."""
    if not on_gpu:
        return event.self_cpu_time_total
    for name in ("self_device_time_total", "self_cuda_time_total"):
        if hasattr(event, name):
            return getattr(event, name)
    return 0.0


def print_profile(prof, iters, step_ms, on_gpu=False):
    averages = prof.key_averages()
    for phase in ("forward", "backward", "optimizer"):
        total = sum(e.cpu_time_total for e in averages if e.key == phase)
        print("profile %-9s total   %8.2f ms" % (phase, total / 1e3 / iters))
    ops = sorted((e for e in averages if e.key not in ("forward", "backward", "optimizer")),
                 key=lambda e: -self_time_us(e, on_gpu))
    for e in ops:
        ms = self_time_us(e, on_gpu) / 1e3 / iters
        if ms < 0.005 * step_ms:
            break
        print("profile   %-44s %8.2f ms %6.1f calls" % (e.key[:44], ms, e.count / iters))


if __name__ == "__main__":
    main()
