#!/usr/bin/env python3
"""Writes train.csv and test.csv for examples/two_input.keras3.json into DIR.

Each line: 4 float features (the model's "dense" input), 2 category ids in
[0, 20) (its "ids" input), then the label 0 or 1: whether a fixed linear
function of the features plus a fixed score per category, plus noise, is
positive. Deterministic (seeded), no dependencies.

    examples/make_two_input_data.py /tmp/two_input_data
"""
import math
import os
import random
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261125)
    weights = [1.5, -2.0, 0.7, 0.0]
    category_score = [math.sin(3.0 * c) * 1.5 for c in range(20)]
    for name, count in (("train.csv", 20000), ("test.csv", 4000)):
        with open(os.path.join(out, name), "w") as f:
            for _ in range(count):
                x = [rng.gauss(0, 1) for _ in weights]
                ids = [rng.randrange(20), rng.randrange(20)]
                score = sum(w * v for w, v in zip(weights, x))
                score += category_score[ids[0]] + 0.5 * category_score[ids[1]]
                label = 1 if score + rng.gauss(0, 0.5) > 0 else 0
                f.write(",".join(["%.5f" % v for v in x] +
                                 [str(i) for i in ids] + [str(label)]) + "\n")


if __name__ == "__main__":
    main()
