#!/usr/bin/python3
"""examples/resnet_small and examples/transformer trained in PyTorch.

The twins of `deploy/local/run_cluster.sh --model examples/<name>.keras3.json`
with pstrain's defaults: Adam (lr 0.001, beta 0.9/0.999, Keras's epsilon
1e-7), sparse categorical cross-entropy on the softmax output, 64 examples
per worker per step; with 2 workers in sync mode the step's gradient
averages 2 x 64 examples, so the default --batch_size here is that global
batch, 128. Same initial values as Keras: Glorot-uniform kernels (with
Keras's fans, also for the attention's 3-D kernels), zero biases,
BatchNormalization gamma 1, beta 0, momentum 0.99 (PyTorch's 0.01), epsilon
1e-3, LayerNormalization epsilon 1e-6. Data: Fashion-MNIST's IDX files,
pixels / 255, the training set shuffled each epoch; test accuracy on the
10,000 test images after each epoch (BatchNormalization on its moving
statistics). One difference stays: in pstrain each worker normalizes with
its own 64-example batch statistics, here the statistics span the global
batch.

Run with Debian's python (the one with torch), OpenBLAS and the malloc
tunables of bench/pytorch_cnn.py:

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \
  /usr/bin/python3 bench/pytorch_examples.py --model resnet --epochs 1 --threads 2

(Where libopenblas0-openmp is not installed, `apt-get download
libopenblas0-openmp && dpkg -x libopenblas0-openmp_*.deb /tmp/openblas`
unpacks it without touching the system's BLAS; point LD_LIBRARY_PATH at
/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp. Debian's default
reference BLAS is about 5x slower on the matrix products here.)

Prints a line per epoch and a final JSON line with the test accuracy and
the training images per second (evaluation not counted).

With --steps N it measures throughput only, as the twin of
`bazel run --config=opt //bench:train_throughput -- --model
examples/<name>.keras3.json --threads T`: plain SGD (lr 0.01), --batch_size
64, 10 untimed warm-up steps, then N steps on the training images in file
order (step k takes images [k * batch, (k + 1) * batch) modulo the set), and
a final JSON line in train_throughput's form. bench/throughput_side_by_side.sh
runs both, alternating.
"""

import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def read_idx(path, magic, header_ints):
    """The array an IDX file (gzip) holds after its header."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    found = int.from_bytes(data[0:4], "big")
    if found != magic:
        sys.exit(f"{path}: magic {found:#010x}, expected {magic:#010x}")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big")
            for i in range(header_ints)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * header_ints).reshape(
        dims)


def load(data_dir, split):
    """(images [n, 28, 28] float32 in [0, 1], labels [n] int64)."""
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"),
                      0x803, 3)
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"),
                      0x801, 1)
    return (torch.from_numpy(images.astype(np.float32) / 255.0),
            torch.from_numpy(labels.astype(np.int64)))


def glorot_uniform_(weight, fan_in, fan_out):
    """Keras's GlorotUniform for a kernel with these fans."""
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    nn.init.uniform_(weight, -limit, limit)


def dense(fan_in, units):
    layer = nn.Linear(fan_in, units)
    glorot_uniform_(layer.weight, fan_in, units)
    nn.init.zeros_(layer.bias)
    return layer


def conv3x3(channels_in, channels_out):
    """Conv2D(filters, 3, padding="same", use_bias=False)."""
    conv = nn.Conv2d(channels_in, channels_out, 3, padding=1, bias=False)
    glorot_uniform_(conv.weight, 9 * channels_in, 9 * channels_out)
    return conv


def batch_norm(channels):
    """Keras's BatchNormalization defaults (momentum 0.99, epsilon 1e-3)."""
    return nn.BatchNorm2d(channels, eps=1e-3, momentum=0.01)


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1, self.bn1 = conv3x3(channels, channels), batch_norm(channels)
        self.conv2, self.bn2 = conv3x3(channels, channels), batch_norm(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + x)


class ResNetSmall(nn.Module):
    """examples/resnet_small.keras3.json (NCHW here, NHWC in Keras)."""

    def __init__(self):
        super().__init__()
        self.stem_conv, self.stem_bn = conv3x3(1, 16), batch_norm(16)
        self.block1, self.block2 = ResidualBlock(16), ResidualBlock(16)
        self.predictions = dense(16, 10)

    def forward(self, images):  # [n, 28, 28]
        x = F.relu(self.stem_bn(self.stem_conv(images.unsqueeze(1))))
        x = self.block2(F.max_pool2d(self.block1(x), 2))
        return self.predictions(x.mean(dim=(2, 3)))  # Logits.


class MultiHeadAttention(nn.Module):
    """Keras 3's MultiHeadAttention(num_heads, key_dim) on mha(x, x).

    Query, key and value projections (features -> heads x key_dim, with
    biases), softmax(q k^T / sqrt(key_dim)) v per head, then the output
    projection (heads x key_dim -> features, with a bias). Keras's kernels
    are 3-D ([features, heads, key_dim] and [heads, key_dim, features]);
    its Glorot fans for them are initialised here on the 2-D views.
    """

    def __init__(self, features, num_heads, key_dim):
        super().__init__()
        self.num_heads, self.key_dim = num_heads, key_dim
        inner = num_heads * key_dim
        self.query, self.key, self.value = (
            nn.Linear(features, inner) for _ in range(3))
        self.attention_output = nn.Linear(inner, features)
        for projection in (self.query, self.key, self.value):
            # Keras kernel [features, heads, key_dim]: fans over the last two
            # axes times the first (its "receptive field").
            glorot_uniform_(projection.weight, num_heads * features,
                            key_dim * features)
            nn.init.zeros_(projection.bias)
        # Keras kernel [heads, key_dim, features].
        glorot_uniform_(self.attention_output.weight, key_dim * num_heads,
                        features * num_heads)
        nn.init.zeros_(self.attention_output.bias)

    def forward(self, x):  # [n, tokens, features]
        n, tokens, _ = x.shape

        def heads(projection):  # [n, heads, tokens, key_dim]
            return projection(x).view(n, tokens, self.num_heads,
                                      self.key_dim).transpose(1, 2)

        q, k, v = heads(self.query), heads(self.key), heads(self.value)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.key_dim)
        attended = torch.softmax(scores, dim=-1) @ v
        return self.attention_output(
            attended.transpose(1, 2).reshape(n, tokens, -1))


class Transformer(nn.Module):
    """examples/transformer.keras3.json: 28 image rows as tokens."""

    def __init__(self, features=64):
        super().__init__()
        self.token_projection = dense(28, features)
        self.attention = MultiHeadAttention(features, num_heads=4, key_dim=16)
        self.attention_norm = nn.LayerNorm(features, eps=1e-6)
        self.ffn_hidden = dense(features, 128)
        self.ffn_output = dense(128, features)
        self.ffn_norm = nn.LayerNorm(features, eps=1e-6)
        self.predictions = dense(features, 10)

    def forward(self, images):  # [n, 28, 28]: [n, tokens, 28 pixels]
        x = self.token_projection(images)
        x = self.attention_norm(x + self.attention(x))
        f = self.ffn_output(F.relu(self.ffn_hidden(x)))
        x = self.ffn_norm(x + f)
        return self.predictions(x.mean(dim=1))  # Logits.


MODELS = {"resnet": ResNetSmall, "transformer": Transformer}


def accuracy(model, images, labels, batch=1000):
    model.eval()
    correct = 0
    with torch.no_grad():
        for first in range(0, len(labels), batch):
            logits = model(images[first:first + batch])
            correct += (logits.argmax(1) == labels[first:first + batch]).sum()
    model.train()
    return correct.item() / len(labels)


def throughput(model, train_x, train_y, args):
    """Times args.steps plain-SGD steps; prints train_throughput's JSON."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = len(train_y) // args.batch_size
    warmup = 10
    start = time.perf_counter()
    for step in range(warmup + args.steps):
        if step == warmup:
            start = time.perf_counter()
        first = (step % batches) * args.batch_size
        x = train_x[first:first + args.batch_size]
        y = train_y[first:first + args.batch_size]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    print(json.dumps({
        "framework": "pytorch",
        "model": args.model,
        "device": "cpu",
        "threads": args.threads,
        "batch": args.batch_size,
        "steps": args.steps,
        "images_per_sec": round(args.steps * args.batch_size / seconds, 1),
        "final_loss": round(loss.item(), 4),
    }, separators=(",", ":")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=128,
                        help="global batch: pstrain's --batch_size x workers")
    parser.add_argument("--learning_rate", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--data_dir",
                        default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--steps", type=int, default=0,
                        help="throughput only: time this many SGD steps")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data_dir, "train")
    if args.steps > 0:
        throughput(MODELS[args.model](), train_x, train_y, args)
        return
    test_x, test_y = load(args.data_dir, "t10k")
    model = MODELS[args.model]()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate,
                                 betas=(0.9, 0.999), eps=1e-7)
    train_seconds = 0.0
    images = 0
    test_accuracy = None
    for epoch in range(1, args.epochs + 1):
        order = torch.randperm(len(train_y))
        start = time.perf_counter()
        for first in range(0, len(order), args.batch_size):
            batch = order[first:first + args.batch_size]
            loss = F.cross_entropy(model(train_x[batch]), train_y[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            images += len(batch)
        train_seconds += time.perf_counter() - start
        test_accuracy = accuracy(model, test_x, test_y)
        print(f"epoch {epoch}: loss {loss.item():.4f}, test accuracy "
              f"{test_accuracy:.4f}, {images / train_seconds:.0f} images/s",
              flush=True)
    print(json.dumps({
        "framework": "pytorch",
        "model": args.model,
        "epochs": args.epochs,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "test_accuracy": round(test_accuracy, 4),
        "images_per_sec": round(images / train_seconds, 1),
        "train_seconds": round(train_seconds, 1),
    }, separators=(",", ":")))


if __name__ == "__main__":
    main()
