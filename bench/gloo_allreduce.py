#!/usr/bin/python3
"""PyTorch 1.13's gloo all-reduce, measured as bench/allreduce_throughput.cc
measures pstrain's ring: N processes on 127.0.0.1, float32 sum of one
buffer per size, median of --rounds rounds after --warmup, bus bandwidth
2 * (N - 1) / N * bytes / time (nccl-tests' definition). Rank 0 prints

    impl=gloo ranks=2 mb=4 rounds=10 dtype=float32 median_ms=... busbw_gbps=...

Run with Debian's Python (python3-torch):
    /usr/bin/python3 bench/gloo_allreduce.py --ranks 3
"""
import argparse
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def participant(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
        world_size=args.ranks)
    for mb in args.sizes_mb:
        n = max(1, int(mb * (1 << 20)) // 4)
        data = torch.arange(n, dtype=torch.float32).remainder_(13).sub_(6)
        times = []
        for r in range(args.warmup + args.rounds):
            start = time.perf_counter()
            dist.all_reduce(data, op=dist.ReduceOp.SUM)
            took = time.perf_counter() - start
            if r >= args.warmup:
                times.append(took * 1e3)
        if rank == 0:
            median = statistics.median_low(times)
            busbw = 2.0 * (args.ranks - 1) / args.ranks * n * 4 / (median / 1e3)
            print(f"impl=gloo ranks={args.ranks} mb={mb:g} rounds={args.rounds}"
                  f" dtype=float32 median_ms={median:.2f}"
                  f" busbw_gbps={busbw / 1e9:.3f}", flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--sizes_mb", default="4,40",
                        type=lambda s: [float(x) for x in s.split(",")])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    if args.ranks < 1:
        sys.exit(f"--ranks: {args.ranks} must be at least 1")
    mp.start_processes(participant, args=(args, free_port()),
                       nprocs=args.ranks, start_method="fork")


if __name__ == "__main__":
    main()
