"""PyTorch twin of bench/allreduce_bench.cpp: all-reduce (sum, float32) bus
bandwidth of torch.distributed's gloo backend on loopback, one line per size.

Run under a launcher that sets RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT:
  python3 -m torch.distributed.run --nproc_per_node 2 bench/allreduce_bench.py
bench/compare_allreduce.sh runs it beside loom's and prints the ratios."""
import argparse
import time

import torch
import torch.distributed as dist


def sizes(lo, hi):
    s = lo
    while s <= hi:
        yield s
        s *= 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=4 << 10)
    ap.add_argument("--max-bytes", type=int, default=64 << 20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    for nbytes in sizes(a.min_bytes, a.max_bytes):
        t = torch.ones(nbytes // 4)
        iters = max(5, min(500, (256 << 20) // nbytes))
        for _ in range(3):
            dist.all_reduce(t)
        best = float("inf")
        for _ in range(a.rounds):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            best = min(best, (time.perf_counter() - t0) / iters)
        # Every rank must agree on the time: take the slowest rank's.
        slowest = torch.tensor([best], dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        seconds = slowest.item()
        busbw = nbytes / seconds * 2 * (world - 1) / world / 1e9
        if rank == 0:
            print(f"torch allreduce ranks={world} bytes={nbytes} us={seconds * 1e6:.1f} busbw_GBps={busbw:.3f}",
                  flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
