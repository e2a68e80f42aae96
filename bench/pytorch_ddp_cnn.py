#!/usr/bin/python3
"""The shipped `cnn` trained by PyTorch 1.13 DDP (gloo) on the CPU.

The data-parallel twin of a pstrain collective run (and of
bench/pytorch_cnn.py, whose model, loss, data and warm-up it takes):
--workers processes on this machine, each with --threads compute threads
and a --batch of its own per step (worker w trains images
[(k * workers + w) * batch, ...) at step k, modulo the set), gradients
summed across them by DistributedDataParallel over gloo and averaged, its
all-reduce overlapped with the backward (DDP's buckets; --no_overlap runs
the backward under no_sync() and all-reduces every gradient after it, in
one flat buffer). The optimizer is --optimizer (adam, as pstrain's cnn
runs by default, or sgd) with --lr.

Run with Debian's python (the one with torch) and OpenBLAS:

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \\
  /usr/bin/python3 bench/pytorch_ddp_cnn.py --workers 2 --threads 1

Prints one JSON line: the global images/s (every worker's images) over
--steps timed steps after 10 untimed ones, between two barriers.
"""

import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_cnn import WARMUP_STEPS, Cnn, load_fashion_mnist  # noqa: E402


def train(rank, args, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.workers)
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)  # the same initial weights on every worker
    x_all, y_all = load_fashion_mnist(args.data_dir)
    batches = len(y_all) // args.batch
    model = Cnn()
    ddp = DistributedDataParallel(model)
    if args.optimizer == "adam":
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    params = [p for p in model.parameters()]
    total = WARMUP_STEPS + args.steps
    start = time.perf_counter()
    loss = None
    for step in range(total):
        if step == WARMUP_STEPS:
            dist.barrier()
            start = time.perf_counter()
        first = ((step * args.workers + rank) % batches) * args.batch
        x = x_all[first:first + args.batch]
        y = y_all[first:first + args.batch]
        optimizer.zero_grad(set_to_none=True)
        if args.no_overlap:
            with ddp.no_sync():
                loss = (torch.nn.functional.cross_entropy(ddp(x), y) +
                        model.l2_loss())
                loss.backward()
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            dist.all_reduce(flat)
            flat /= args.workers
            at = 0
            for p in params:
                n = p.grad.numel()
                p.grad.copy_(flat[at:at + n].view_as(p.grad))
                at += n
        else:
            loss = (torch.nn.functional.cross_entropy(ddp(x), y) +
                    model.l2_loss())
            loss.backward()
        optimizer.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        out.put({
            "framework": "pytorch-ddp-gloo",
            "model": "cnn",
            "workers": args.workers,
            "threads": args.threads,
            "batch": args.batch,
            "steps": args.steps,
            "overlap": not args.no_overlap,
            "images_per_sec": round(
                args.steps * args.batch * args.workers / seconds, 1),
            "steps_per_sec": round(args.steps / seconds, 2),
            "final_loss": round(loss.item(), 4),
        })
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--no_overlap", action="store_true")
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    if args.workers < 1 or args.steps < 1 or args.batch < 1:
        sys.exit("--workers, --steps and --batch must be >= 1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=train, args=(r, args, port, out))
             for r in range(args.workers)]
    for p in procs:
        p.start()
    result = out.get()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a worker exited with {p.exitcode}")
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
