#!/usr/bin/python3
"""The Criteo example (examples/wide_deep.keras3.json) trained in PyTorch in
one process: the twin of `deploy/local/run_cluster.sh --example criteo`.

Same data (the train*.tsv / test*.tsv of --data_dir, as bench/criteo_gen.py
writes them), same features (I_j -> log(1 + max(I_j, 0)), missing 0; each
C_k value -> data/criteo_hash.h's 64-bit id, so every field shares one id
space), same model (one table of 16-wide embeddings for the 26 ids,
flattened, joined with the 13 dense features, Linear 429->256 ReLU,
256->128 ReLU, 128->1, sigmoid; Glorot-uniform kernels, zero biases,
embeddings uniform in [-0.05, 0.05]), same loss (binary cross-entropy),
Adagrad everywhere (Keras's initial accumulator 0.1 and epsilon 1e-7), the
same batch. The 64-bit ids are numbered densely before training (as a
growing table would hold them; no collisions) and the table is an
nn.Embedding with sparse gradients, so a step touches only its rows.
Parsing is not timed; the training epochs are. The parsed arrays are
kept beside the data (.<file>.pytorch.npz) for the next run.

  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
  GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967295 \
  /usr/bin/python3 bench/ctr_pytorch.py --data_dir /tmp/pstrain-criteo \
      --threads 1 --batch 1024 --epochs 1

(Debian's reference BLAS makes the MLP ten times slower: install
libopenblas0-openmp. --batch 1024 is the global batch of the example's 2
workers x 512, so both take the same steps.)

Prints examples/s, the test AUC (exact, ties counting one half) and log
loss, and the generator's Bayes-optimal AUC when test.tsv.bayes.json is
there; the last line is JSON.
"""

import argparse
import glob
import gzip
import json
import math
import os
import time

import numpy as np
import torch

MASK = (1 << 64) - 1


def splitmix64(x):
    """common/derived_seed.h's SplitMix64 on uint64 numpy arrays."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(MASK)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(MASK)
    return x ^ (x >> np.uint64(31))


def read(paths):
    """Labels [N], dense [N, 13] and 64-bit ids [N, 26] of Criteo files."""
    labels, dense, values, missing = [], [], [], []
    for path in paths:
        opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
        with opener(path, "rt") as f:
            for line in f:
                c = line.rstrip("\r\n").split("\t")
                if len(c) != 40:
                    continue
                labels.append(float(c[0]))
                dense.append([math.log1p(max(int(v), 0)) if v else 0.0
                              for v in c[1:14]])
                values.append([int(v, 16) if v else 0 for v in c[14:]])
                missing.append([not v for v in c[14:]])
    fields = np.arange(1, 27, dtype=np.uint64)
    with np.errstate(over="ignore"):
        ids = splitmix64(splitmix64(fields)[None, :] ^
                         np.array(values, dtype=np.uint64))
        missing_ids = splitmix64(splitmix64(fields + np.uint64(32)))
    ids = np.where(np.array(missing), missing_ids[None, :], ids)
    return (np.array(labels, dtype=np.float32),
            np.array(dense, dtype=np.float32), ids)


def read_cached(paths):
    """read(paths), kept beside the first file as .<name>.pytorch.npz and
    used again while every file's size and modification time are the same
    (parsing 1 M lines in Python takes most of a minute)."""
    if not paths:
        return read(paths)
    signature = json.dumps([(p, os.path.getsize(p), os.path.getmtime(p))
                            for p in paths])
    head, tail = os.path.split(paths[0])
    cache = os.path.join(head, "." + tail + ".pytorch.npz")
    if os.path.exists(cache):
        saved = np.load(cache)
        if str(saved["signature"]) == signature:
            return saved["labels"], saved["dense"], saved["ids"]
    labels, dense, ids = read(paths)
    try:
        with open(cache + ".tmp", "wb") as f:
            np.savez(f, signature=signature, labels=labels, dense=dense, ids=ids)
        os.replace(cache + ".tmp", cache)
    except OSError:
        pass  # a read-only data directory: parse every time
    return labels, dense, ids


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    s, y = scores[order], labels[order]
    _, first, counts = np.unique(s, return_index=True, return_counts=True)
    ranks = np.empty(len(s))
    for f, n in zip(first, counts):  # average ranks of ties
        ranks[f:f + n] = f + (n + 1) / 2.0
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


class WideDeep(torch.nn.Module):
    def __init__(self, rows):
        super().__init__()
        self.embedding = torch.nn.Embedding(rows, 16, sparse=True)
        torch.nn.init.uniform_(self.embedding.weight, -0.05, 0.05)
        self.hidden_1 = torch.nn.Linear(13 + 26 * 16, 256)
        self.hidden_2 = torch.nn.Linear(256, 128)
        self.click = torch.nn.Linear(128, 1)
        for layer in (self.hidden_1, self.hidden_2, self.click):
            torch.nn.init.xavier_uniform_(layer.weight)
            torch.nn.init.zeros_(layer.bias)

    def forward(self, dense, ids):
        x = torch.cat([dense, self.embedding(ids).flatten(1)], dim=1)
        x = torch.relu(self.hidden_1(x))
        x = torch.relu(self.hidden_2(x))
        return self.click(x).squeeze(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", default="/tmp/pstrain-criteo")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    files = lambda p: sorted(glob.glob(os.path.join(args.data_dir, p + "*.tsv")) +
                             glob.glob(os.path.join(args.data_dir, p + "*.tsv.gz")))
    y, dense, ids = read_cached(files("train"))
    ty, tdense, tids = read_cached(files("test"))
    # A dense row per distinct 64-bit id (what a growing table holds).
    unique, inverse = np.unique(np.concatenate([ids, tids]).ravel(),
                                return_inverse=True)
    inverse = inverse.reshape(-1, 26).astype(np.int64)
    rows, trows = inverse[:len(ids)], inverse[len(ids):]
    model = WideDeep(len(unique))
    dense_params = [p for n, p in model.named_parameters() if n != "embedding.weight"]
    opts = [torch.optim.Adagrad(
                [model.embedding.weight], lr=args.learning_rate,
                initial_accumulator_value=0.1, eps=1e-7),
            torch.optim.Adagrad(dense_params, lr=args.learning_rate,
                                initial_accumulator_value=0.1, eps=1e-7)]
    loss_fn = torch.nn.BCEWithLogitsLoss()
    y_t, dense_t, rows_t = map(torch.from_numpy, (y, dense, rows))
    steps = len(y) // args.batch
    start = time.perf_counter()
    for _ in range(args.epochs):
        for s in range(steps):
            b = slice(s * args.batch, (s + 1) * args.batch)
            for o in opts:
                o.zero_grad()
            loss = loss_fn(model(dense_t[b], rows_t[b]), y_t[b])
            loss.backward()
            for o in opts:
                o.step()
    seconds = time.perf_counter() - start
    with torch.no_grad():
        logits = model(torch.from_numpy(tdense), torch.from_numpy(trows)).numpy()
    p = np.clip(1 / (1 + np.exp(-logits.astype(np.float64))), 1e-7, 1 - 1e-7)
    result = {
        "framework": "pytorch", "threads": args.threads, "batch": args.batch,
        "train_rows": int(len(y)), "distinct_ids": int(len(unique)),
        "examples_per_sec": args.epochs * steps * args.batch / seconds,
        "test_auc": auc(logits, ty),
        "test_logloss": float(-np.mean(ty * np.log(p) + (1 - ty) * np.log(1 - p))),
    }
    bayes = os.path.join(args.data_dir, "test.tsv.bayes.json")
    if os.path.exists(bayes):
        result["bayes_auc"] = json.load(open(bayes))["bayes_auc"]
    print("pytorch: %.0f examples/s, test AUC %.4f, log loss %.4f%s" % (
        result["examples_per_sec"], result["test_auc"], result["test_logloss"],
        ", Bayes-optimal AUC %.4f" % result["bayes_auc"] if "bayes_auc" in result else ""))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
