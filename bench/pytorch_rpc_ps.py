#!/usr/bin/python3
"""The main job's cluster in PyTorch 1.13: a parameter server over RPC.

The twin of `deploy/local/run_cluster.sh` with its defaults (the shipped
`cnn`, Adam 0.001, --ps 2 ps and --workers 2 workers on this machine, a
batch of 64 per worker, one epoch of Fashion-MNIST), built the way
PyTorch's own parameter-server tutorials build one with
torch.distributed.rpc:

- Each ps process holds some of the model's parameters (placed by size,
  largest first onto the ps holding the fewest bytes, as pstrain's chief
  places variables) and an Adam optimizer over them. Every process starts
  from the same weights (torch.manual_seed(42), bench/pytorch_cnn.py's
  model).
- Each worker, every step, pulls every parameter from its ps (rpc_async to
  all of them at once), computes the loss and its gradients on its own
  batch with one thread (images [(k * workers + w) * batch, ...) at step k,
  modulo the set), and pushes each ps its gradients (rpc_async, all at
  once), waiting for the answers.
- --mode sync: a ps sums a step's gradients from every worker, divides the
  sum by the number of workers (the mean over the global batch, as
  pstrain's sync ps scales the sum by the global batch), takes one Adam
  step, and only then answers that step's pushes (@async_execution), so
  the next pull reads the updated weights. --mode async: a ps applies each
  push at once, under a lock.

Run with Debian's python (the one with torch) and OpenBLAS:

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \\
  /usr/bin/python3 bench/pytorch_rpc_ps.py --mode sync

Prints one JSON line: the global training images/s, every worker's images
over the time from a common start (after every process has loaded the data
and joined RPC) to the last worker's last step, and the mean training loss
of the last 50 steps.
"""

import argparse
import json
import os
import queue
import socket
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_cnn import Cnn, load_fashion_mnist  # noqa: E402


def placement(model, num_ps):
    """ps index of each parameter name: largest first onto the lightest."""
    load = [0] * num_ps
    where = {}
    params = sorted(model.named_parameters(), key=lambda np_: -np_[1].numel())
    for name, p in params:
        ps = min(range(num_ps), key=lambda i: (load[i], i))
        where[name] = ps
        load[ps] += p.numel()
    return where


class ParameterServer:
    """One ps task's parameters and optimizer (lives in the ps process)."""

    def __init__(self, index, num_ps, num_workers, mode, lr):
        torch.manual_seed(42)
        model = Cnn()
        where = placement(model, num_ps)
        self.params = [p.detach().clone() for n, p in model.named_parameters()
                       if where[n] == index]
        for p in self.params:
            p.grad = torch.zeros_like(p)
        self.optimizer = torch.optim.Adam(self.params, lr=lr)
        self.num_workers = num_workers
        self.sync = mode == "sync"
        self.lock = threading.Lock()
        self.pushes = 0
        self.step_done = torch.futures.Future()

    def pull(self):
        with self.lock:
            return [p.detach().clone() for p in self.params]

    def push(self, grads):
        """A future completed once `grads` are applied (sync: with the
        step's other pushes)."""
        with self.lock:
            if not self.sync:
                for p, g in zip(self.params, grads):
                    p.grad.copy_(g)
                self.optimizer.step()
                done = torch.futures.Future()
                done.set_result(None)
                return done
            for p, g in zip(self.params, grads):
                p.grad.add_(g)
            self.pushes += 1
            done = self.step_done
            if self.pushes == self.num_workers:
                for p in self.params:
                    p.grad.div_(self.num_workers)
                self.optimizer.step()
                for p in self.params:
                    p.grad.zero_()
                self.pushes = 0
                self.step_done = torch.futures.Future()
                done.set_result(None)
            return done


# This process's ParameterServer, in a ps process; what the RPCs below
# (called by name from the workers) serve.
_SERVER = None


def _pull():
    return _SERVER.pull()


@rpc.functions.async_execution
def _push(grads):
    return _SERVER.push(grads)


def run(rank, args, port, ready, go, out):
    global _SERVER
    torch.set_num_threads(1)
    num_ps = args.ps
    is_ps = rank < num_ps
    if is_ps:
        _SERVER = ParameterServer(rank, num_ps, args.workers, args.mode,
                                  args.lr)
    name = f"ps{rank}" if is_ps else f"worker{rank - num_ps}"
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=300)
    rpc.init_rpc(name, rank=rank, world_size=num_ps + args.workers,
                 rpc_backend_options=options)
    if is_ps:
        ready.put(name)
        rpc.shutdown()  # serves the workers until every process is done
        return
    w = rank - num_ps
    x_all, y_all = load_fashion_mnist(args.data_dir)
    batches = len(y_all) // args.batch
    steps = args.epochs * (len(y_all) // (args.batch * args.workers))
    model = Cnn()
    where = placement(model, num_ps)
    # Each ps's parameters, in the order it holds them.
    held = [[p for n, p in model.named_parameters() if where[n] == i]
            for i in range(num_ps)]
    ready.put(name)
    go.wait()
    losses = []
    start = time.perf_counter()
    for step in range(steps):
        pulls = [rpc.rpc_async(f"ps{i}", _pull) for i in range(num_ps)]
        for params, fut in zip(held, pulls):
            for p, value in zip(params, fut.wait()):
                p.data = value
        first = ((step * args.workers + w) % batches) * args.batch
        x = x_all[first:first + args.batch]
        y = y_all[first:first + args.batch]
        for p in model.parameters():
            p.grad = None
        loss = torch.nn.functional.cross_entropy(model(x), y) + model.l2_loss()
        loss.backward()
        torch.futures.wait_all([
            rpc.rpc_async(f"ps{i}", _push, args=([p.grad for p in params],))
            for i, params in enumerate(held)])
        losses.append(loss.item())
    seconds = time.perf_counter() - start
    out.put((steps * args.batch, seconds, float(np.mean(losses[-50:]))))
    rpc.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="sync", choices=["sync", "async"])
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()
    if min(args.ps, args.workers, args.batch, args.epochs) < 1:
        sys.exit("--ps, --workers, --batch and --epochs must be >= 1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    ready, out, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=run, args=(r, args, port, ready, go, out))
             for r in range(args.ps + args.workers)]
    for p in procs:
        p.start()

    def receive(q):
        # A process that died never answers: fail instead of waiting forever.
        while True:
            try:
                return q.get(timeout=5)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    for p in procs:
                        p.kill()
                    sys.exit(f"a process exited with {dead[0].exitcode}")

    for _ in procs:
        receive(ready)
    go.set()
    done = [receive(out) for _ in range(args.workers)]
    for p in procs:
        p.join()
        if p.exitcode != 0:
            sys.exit(f"a process exited with {p.exitcode}")
    images = sum(d[0] for d in done)
    seconds = max(d[1] for d in done)
    print(json.dumps({
        "framework": "pytorch-rpc-ps",
        "mode": args.mode,
        "ps": args.ps,
        "workers": args.workers,
        "batch": args.batch,
        "epochs": args.epochs,
        "images_per_sec": round(images / seconds, 1),
        "final_loss": round(float(np.mean([d[2] for d in done])), 4),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
