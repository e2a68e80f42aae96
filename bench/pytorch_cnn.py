#!/usr/bin/python3
"""The shipped `cnn` trained in PyTorch, the twin of bench/train_throughput.

Same model (Conv2d 1->32 3x3 ReLU, MaxPool 2, Conv2d 32->64 3x3 ReLU,
MaxPool 2, Flatten, Linear 1600->64 ReLU, Linear 64->10; Glorot-uniform
kernels, zero biases), same loss (mean cross-entropy from logits plus
1e-5 * sum(w^2) over the four kernels, as the Keras L2 regularizers), same
plain SGD (lr 0.01), same data (Fashion-MNIST training images as float32 in
[0, 1], converted once; step k takes images [k * batch, (k + 1) * batch)
modulo the set, in file order), same timing (10 untimed warm-up steps).
Images are NCHW here and NHWC in pstrain: each framework's native layout.

Run with Debian's python (the one with torch) and OpenBLAS:

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \
  /usr/bin/python3 bench/pytorch_cnn.py --threads 1

Prints a final JSON line like bench/train_throughput's, with
"framework": "pytorch".

--device cuda trains on the GPU with the data, weights and gradients kept
there (PyTorch's own setup), in full float32 like pstrain's cuDNN path (TF32
off); it is the twin of `train_throughput --device gpu`, which also moves
the weights and gradients between host and GPU every step, as a worker
between the ps and its GPU must.
"""

import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch

WARMUP_STEPS = 10
L2 = 1e-5


def read_idx(path, magic, header_ints):
    """The array an IDX file (raw or gzip) holds after its header."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    found = int.from_bytes(data[0:4], "big")
    if found != magic:
        sys.exit(f"{path}: magic {found:#010x}, expected {magic:#010x}")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(header_ints)]
    offset = 4 + 4 * header_ints
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(dims)


def load_fashion_mnist(data_dir):
    """Fashion-MNIST's training images (float32 NCHW in [0, 1]) and labels."""
    images = read_idx(
        os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 0x803, 3)
    labels = read_idx(
        os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 0x801, 1)
    x_all = torch.from_numpy(
        images.astype(np.float32) / 255.0).unsqueeze(1).contiguous()
    return x_all, torch.from_numpy(labels.astype(np.int64))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 32, 3)
        self.conv_1 = torch.nn.Conv2d(32, 64, 3)
        self.dense = torch.nn.Linear(1600, 64)
        self.dense_1 = torch.nn.Linear(64, 10)
        for layer in self.kernels():
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)

    def kernels(self):
        return [self.conv, self.conv_1, self.dense, self.dense_1]

    def forward(self, x):
        f = torch.nn.functional
        x = f.max_pool2d(f.relu(self.conv(x)), 2)
        x = f.max_pool2d(f.relu(self.conv_1(x)), 2)
        # Flatten in NHWC order, as Keras does, so dense's rows line up with
        # the Keras kernel's (the cost is one small permute).
        x = x.permute(0, 2, 3, 1).flatten(1)
        x = f.relu(self.dense(x))
        return self.dense_1(x)

    def l2_loss(self):
        return L2 * sum((layer.weight ** 2).sum() for layer in self.kernels())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)
    x_all, y_all = load_fashion_mnist(args.data_dir)
    x_all, y_all = x_all.to(device), y_all.to(device)
    batches = len(y_all) // args.batch

    model = Cnn().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    total = WARMUP_STEPS + args.steps
    start = time.perf_counter()
    loss = None
    for step in range(total):
        if step == WARMUP_STEPS:
            if args.device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
        first = (step % batches) * args.batch
        x = x_all[first:first + args.batch]
        y = y_all[first:first + args.batch]
        loss = torch.nn.functional.cross_entropy(model(x), y) + model.l2_loss()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    final_loss = loss.item()  # Waits for the GPU, if any.
    seconds = time.perf_counter() - start
    print(json.dumps({
        "framework": "pytorch",
        "model": "cnn",
        "device": args.device,
        "threads": args.threads,
        "batch": args.batch,
        "steps": args.steps,
        "images_per_sec": round(args.steps * args.batch / seconds, 1),
        "final_loss": round(final_loss, 4),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
