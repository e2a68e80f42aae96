#!/usr/bin/python3
"""Criteo-format data with a known answer, for the recommendation models.

Writes files in the Criteo display-advertising format (data/criteo_line.h:
label, I1..I13, C1..C26, tab-separated, empty = missing) whose labels come
from a hidden model, and beside each file `<file>.bayes.json` with the AUC
and log loss of the true probabilities on that file's labels: the best any
model can do, so a training run can say how close it came.

  /usr/bin/python3 bench/criteo_gen.py --out_dir /tmp/criteo \
      --train_rows 1000000 --test_rows 100000 --scale 0.1 --seed 1

writes /tmp/criteo/train.tsv and test.tsv (train-00000.tsv, ... with
--train_files N; .tsv.gz with --gzip), the directory layout that
`--data_format=criteo --data_dir=/tmp/criteo` reads.

The data set's shape:
  - C1..C26: field k has round(K_k * scale) distinct values, but at least
    min(K_k, 10), where K_k is the real Criteo Kaggle set's cardinality
    (KAGGLE_CARDINALITIES: the counts DLRM's Kaggle configuration uses, 33.8 M
    values in all). Value frequencies are Zipf-like: the value of rank r
    (0-based) has probability about proportional to (r + 1)^-ZIPF_EXPONENT.
    A rank's value is written as 8 lowercase hex digits, (A_k * r + B_k) mod
    2^32 with A_k odd, so distinct ranks have distinct values. Fields are
    missing at about the real set's rates (CATEGORICAL_MISSING).
  - I1..I13: log-normal counts (I2 sometimes negative, down to -3, as in the
    real set), missing at about the real set's rates (INTEGER_MISSING).
  - label ~ Bernoulli(sigmoid(z)), with the hidden logit
      z = b + sum_k w_k(value of C_k)           per-value weights, N(0, s_k^2)
            + sum_(j,k) in PAIRS w_jk(C_j, C_k)  a few field interactions
            + sum_j a_j * L_j + 0.8 * [L1 > 1][L7 < 1.5]    L_j = log1p(max(I_j, 0))
    where a missing value has a weight of its own, every weight is a hash
    of (seed, field, value) (so train and test share one hidden model), and
    b is set so that about 25% of the labels are 1.

Everything follows from --seed: the same arguments write the same bytes.
Generation is vectorised in chunks of 200,000 rows (about 10 s per million
rows here, plain; gzip adds its compression time).
"""

import argparse
import gzip
import json
import os
import sys

import numpy as np

KAGGLE_CARDINALITIES = [
    1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683,
    8351593, 3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15,
    286181, 105, 142572]
# Approximate fractions of empty values in the real Kaggle set.
CATEGORICAL_MISSING = [
    0.0, 0.0, 0.034, 0.034, 0.0, 0.121, 0.0, 0.0, 0.0, 0.0, 0.0, 0.034, 0.0,
    0.0, 0.0, 0.034, 0.0, 0.0, 0.44, 0.44, 0.034, 0.76, 0.0, 0.034, 0.44,
    0.44]
INTEGER_MISSING = [
    0.45, 0.0, 0.21, 0.22, 0.026, 0.22, 0.043, 0.0005, 0.043, 0.45, 0.043,
    0.77, 0.22]
# log-normal parameters of the integer counts.
INTEGER_MU = [0.7, 1.5, 1.8, 1.5, 7.5, 3.5, 1.6, 2.3, 3.8, 0.4, 1.0, 0.3, 1.5]
INTEGER_SIGMA = [1.0, 1.6, 1.3, 1.0, 1.6, 1.5, 1.3, 1.0, 1.3, 0.7, 0.9, 0.9,
                 1.1]
ZIPF_EXPONENT = 1.1
# Field interactions (1-based categorical fields) and their weights' scale.
PAIRS = [(6, 9), (14, 17), (20, 23), (1, 5)]
PAIR_SCALE = 0.5
VALUE_SCALE = 0.26
POSITIVE_RATE = 0.25
CHUNK = 200_000

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(x):
    """SplitMix64's output function on a uint64 array (wrapping arithmetic)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & M64
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & M64
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & M64
    return x ^ (x >> np.uint64(31))


def hashed_normal(seed, stream, keys):
    """A standard normal per key, fixed by (seed, stream, key)."""
    salt = splitmix64(np.array([seed * 1000003 + stream], dtype=np.uint64))
    h = splitmix64(keys.astype(np.uint64) ^ salt)
    u1 = ((h >> np.uint64(32)).astype(np.float64) + 1.0) / 4294967296.0
    u2 = (h & np.uint64(0xFFFFFFFF)).astype(np.float64) / 4294967296.0
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


class Model:
    """The data set's shape and its hidden model, from the seed."""

    def __init__(self, seed, scale):
        self.seed = seed
        self.cardinalities = [
            max(min(k, 10), int(round(k * scale))) for k in KAGGLE_CARDINALITIES]
        rng = np.random.default_rng([seed, 0])
        self.hex_a = (rng.integers(0, 2**31, 26) * 2 + 1).astype(np.uint64)
        self.hex_b = rng.integers(0, 2**32, 26).astype(np.uint64)
        self.dense_weights = rng.normal(0.0, 0.15, 13)
        # Fewer values, larger weights: a field of 3 values carries more
        # signal per value than one of 10 million.
        self.value_scale = [
            VALUE_SCALE * (1.5 if k < 100 else 1.0) for k in self.cardinalities]
        self.bias = 0.0
        z = self.logits(self.features(np.random.default_rng([seed, 1]), CHUNK))
        lo, hi = -20.0, 20.0
        for _ in range(60):  # mean sigmoid(z + b) = POSITIVE_RATE
            mid = (lo + hi) / 2
            if np.mean(1.0 / (1.0 + np.exp(-(z + mid)))) < POSITIVE_RATE:
                lo = mid
            else:
                hi = mid
        self.bias = (lo + hi) / 2

    def zipf_ranks(self, rng, k, n):
        """n ranks in [0, k), P(r) about proportional to (r+1)^-s."""
        s = ZIPF_EXPONENT
        u = rng.random(n)
        top = (k + 1.0) ** (1.0 - s)
        x = (1.0 + u * (top - 1.0)) ** (1.0 / (1.0 - s))
        return np.minimum(np.floor(x).astype(np.int64) - 1, k - 1)

    def features(self, rng, n):
        """Integer features (int64, missing as a mask) and categorical ranks
        (int64, -1 = missing) for n rows."""
        ints = np.empty((n, 13), dtype=np.int64)
        int_missing = np.empty((n, 13), dtype=bool)
        for j in range(13):
            ints[:, j] = np.floor(
                np.exp(rng.normal(INTEGER_MU[j], INTEGER_SIGMA[j], n)))
            int_missing[:, j] = rng.random(n) < INTEGER_MISSING[j]
        negative = rng.random(n) < 0.05  # I2: -1..-3, as in the real set.
        ints[negative, 1] = -rng.integers(1, 4, int(negative.sum()))
        ranks = np.empty((n, 26), dtype=np.int64)
        for f in range(26):
            ranks[:, f] = self.zipf_ranks(rng, self.cardinalities[f], n)
            ranks[rng.random(n) < CATEGORICAL_MISSING[f], f] = -1
        return ints, int_missing, ranks

    def logits(self, feats):
        ints, int_missing, ranks = feats
        logs = np.where(int_missing, 0.0, np.log1p(np.maximum(ints, 0)))
        z = np.full(len(ranks), self.bias)
        for f in range(26):
            # Missing (-1) gets key k_f: a weight of its own.
            keys = np.where(ranks[:, f] < 0, self.cardinalities[f], ranks[:, f])
            z += self.value_scale[f] * hashed_normal(self.seed, f + 1, keys)
        for p, (a, b) in enumerate(PAIRS):
            ka = np.where(ranks[:, a - 1] < 0, self.cardinalities[a - 1],
                          ranks[:, a - 1])
            kb = np.where(ranks[:, b - 1] < 0, self.cardinalities[b - 1],
                          ranks[:, b - 1])
            keys = ka * (self.cardinalities[b - 1] + 1) + kb
            z += PAIR_SCALE * hashed_normal(self.seed, 100 + p, keys)
        z += logs @ self.dense_weights
        z += 0.8 * ((logs[:, 0] > 1.0) & (logs[:, 6] < 1.5))
        return z


HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def hex8(values):
    """uint64 values < 2^32 as 8 lowercase hex digits each (bytes)."""
    shifts = np.arange(28, -1, -4, dtype=np.uint64)
    nibbles = (values[:, None] >> shifts) & np.uint64(0xF)
    return HEX_DIGITS[nibbles.astype(np.int64)].view("S8").ravel()


def lines(model, feats, labels):
    ints, int_missing, ranks = feats
    columns = [np.where(labels, b"1", b"0").tolist()]
    for j in range(13):
        text = ints[:, j].astype("S20")
        columns.append(np.where(int_missing[:, j], b"", text).tolist())
    for f in range(26):
        r = ranks[:, f]
        values = (model.hex_a[f] * np.maximum(r, 0).astype(np.uint64)
                  + model.hex_b[f]) & np.uint64(0xFFFFFFFF)
        columns.append(np.where(r < 0, b"", hex8(values)).tolist())
    return b"\n".join(map(b"\t".join, zip(*columns))) + b"\n"


def auc(p, y):
    """Area under the ROC curve, ties counted half (average ranks)."""
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    values, inverse, counts = np.unique(p, return_inverse=True,
                                        return_counts=True)
    ends = np.cumsum(counts)
    average_rank = ends - (counts - 1) / 2.0  # 1-based
    rank_sum = average_rank[inverse][y.astype(bool)].sum()
    return float((rank_sum - positives * (positives + 1) / 2.0)
                 / (positives * negatives))


def write_file(model, path, rows, stream, args):
    rng = np.random.default_rng([args.seed, 2, stream])
    all_p, all_y = [], []
    opener = gzip.open if args.gzip else open
    with opener(path, "wb") as out:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            feats = model.features(rng, n)
            p = 1.0 / (1.0 + np.exp(-model.logits(feats)))
            y = rng.random(n) < p
            out.write(lines(model, feats, y))
            all_p.append(p)
            all_y.append(y)
    p = np.concatenate(all_p) if all_p else np.zeros(0)
    y = np.concatenate(all_y) if all_y else np.zeros(0, dtype=bool)
    eps = 1e-15
    q = np.clip(p, eps, 1 - eps)
    summary = {
        "file": os.path.basename(path),
        "rows": rows,
        "positives": int(y.sum()),
        "positive_rate": float(y.mean()) if rows else 0.0,
        "mean_probability": float(p.mean()) if rows else 0.0,
        "bayes_auc": auc(p, y) if rows else None,
        "bayes_log_loss": float(-np.mean(y * np.log(q) + (~y) * np.log(1 - q)))
        if rows else None,
        "seed": args.seed,
        "scale": args.scale,
        "cardinalities": model.cardinalities,
    }
    with open(path + ".bayes.json", "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    if args.probabilities:
        np.savetxt(path + ".probabilities", p, fmt="%.17g")
    return summary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--train_rows", type=int, default=1_000_000)
    parser.add_argument("--test_rows", type=int, default=100_000)
    parser.add_argument("--train_files", type=int, default=1,
                        help="split the training rows over this many files")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="times the Kaggle set's cardinalities")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gzip", action="store_true",
                        help="write .tsv.gz files")
    parser.add_argument("--probabilities", action="store_true",
                        help="also write each row's true probability, one a "
                        "line, to <file>.probabilities")
    args = parser.parse_args()
    if args.train_rows < 0 or args.test_rows < 0:
        sys.exit("criteo_gen.py: --train_rows and --test_rows must be >= 0")
    if args.train_files < 1:
        sys.exit("criteo_gen.py: --train_files must be >= 1")
    if not args.scale > 0:
        sys.exit("criteo_gen.py: --scale must be > 0")
    if args.seed < 0:
        sys.exit("criteo_gen.py: --seed must be >= 0")
    os.makedirs(args.out_dir, exist_ok=True)
    model = Model(args.seed, args.scale)
    suffix = ".tsv.gz" if args.gzip else ".tsv"
    files = []
    per_file = -(-args.train_rows // args.train_files)
    for i in range(args.train_files):
        rows = max(0, min(per_file, args.train_rows - i * per_file))
        name = ("train" if args.train_files == 1 else "train-%05d" % i) + suffix
        files.append((name, rows, 1 + i))
    files.append(("test" + suffix, args.test_rows, 0))
    for name, rows, stream in files:
        s = write_file(model, os.path.join(args.out_dir, name), rows, stream,
                       args)
        print("%s: %d rows, %.4f positive, Bayes-optimal AUC %s, log loss %s"
              % (name, rows, s["positive_rate"],
                 "%.4f" % s["bayes_auc"] if s["bayes_auc"] is not None else "-",
                 "%.4f" % s["bayes_log_loss"]
                 if s["bayes_log_loss"] is not None else "-"))


if __name__ == "__main__":
    main()
