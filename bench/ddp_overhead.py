"""PyTorch twin of bench/ddp_overhead.cpp: the ConvNet's training step with
and without DistributedDataParallel on every rank, in one run (gloo, CPU).

Run under a launcher that sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
(loomrun or torchrun); bench/ddp_overhead.sh --with-torch runs it after
loom's.  Same method as loom's: rounds alternate `block` steps of each
model, the figure is the median step time, the slowest rank's."""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "pyloom"))
from loom_torch import ConvNet  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--broadcast-buffers", default="true")
    a, _ = ap.parse_known_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(1234 + rank)
    x = torch.randn(a.batch, 1, a.size, a.size)
    y = torch.randint(0, 10, (a.batch,))
    local = ConvNet()
    ddp = DDP(ConvNet(), broadcast_buffers=a.broadcast_buffers.lower() in ("1", "true", "yes"))
    local_opt = torch.optim.SGD(local.parameters(), lr=0.01, momentum=0.9)
    ddp_opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def step(model, opt):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()
        return (time.perf_counter() - t0) * 1e3

    for _ in range(a.warmup):
        step(local, local_opt)
        step(ddp, ddp_opt)
    local_ms, ddp_ms = [], []
    for _ in range(a.rounds):
        dist.barrier()
        local_ms += [step(local, local_opt) for _ in range(a.block)]
        dist.barrier()
        ddp_ms += [step(ddp, ddp_opt) for _ in range(a.block)]

    def slowest(v):
        t = torch.tensor([v], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    lm = slowest(statistics.median_high(local_ms))
    dm = slowest(statistics.median_high(ddp_ms))
    if rank == 0:
        print(f"torch ddp_overhead model=convnet ranks={dist.get_world_size()} batch_per_rank={a.batch} "
              f"size={a.size} threads={a.threads} local_ms={lm:.2f} ddp_ms={dm:.2f} "
              f"overhead_pct={100 * (dm / lm - 1):.1f}", flush=True)
    # PyTorch 1.13 can hang at exit here: once rank 0 (the store's server) has
    # gone, another rank's store client thread spins on the closed socket
    # while ~ProcessGroupGloo joins a worker waiting for the GIL.  So every
    # rank meets here, then leaves without tearing the group down.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
