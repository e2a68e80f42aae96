#!/usr/bin/python3
"""Reference numbers for ps/sparse_optimizer_test.cc.

Run with Debian's Python (PyTorch 1.13, NumPy):
    /usr/bin/python3 ps/testdata/make_sparse_optimizer_refs.py \
        > ps/testdata/sparse_optimizer_refs.txt

A table of ROWS rows of WIDTH floats gets STEPS updates; update t touches
the rows TOUCHED[t] with sparse gradients. Written, one line per optimizer
and array: "<case> <array> <ROWS * WIDTH values, row-major>".

  adagrad     torch.optim.Adagrad (lr_decay 0), sparse gradients of one
              table: accumulator += g^2; w -= lr * g / (sqrt(acc) + eps),
              TensorFlow's ApplyAdagradV2 (Keras 3 puts eps inside the sqrt).
  lazy_adam   torch.optim.SparseAdam, one parameter (and optimizer) per row,
              so that each row's step count advances only when the row is
              touched. (SparseAdam on the whole table counts steps per table,
              like TensorFlow Addons' LazyAdam.)
  ftrl, ftrl_p07  PyTorch has no FTRL: TensorFlow's ApplyFtrlV2 formula
              written here in float64 with NumPy, learning_rate_power -0.5
              and -0.7.
"""
import math

import numpy as np
import torch

ROWS = 4
WIDTH = 3
STEPS = 6
TOUCHED = {1: [0, 1, 2, 3], 2: [0, 2], 3: [1], 4: [0, 2, 3], 5: [2],
           6: [0, 1]}
LR = 0.1


def initial():
    return np.array([[0.5 - 0.3 * r + 0.2 * j for j in range(WIDTH)]
                     for r in range(ROWS)], dtype=np.float32)


def gradient(t, r):
    # As Gradient() in the test: computed in double, rounded to float.
    return np.array([math.sin(0.9 * j + 1.3 * r + 1.7 * t) * (1 + 0.3 * j)
                     for j in range(WIDTH)], dtype=np.float32)


def emit(case, array, values):
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    print(case, array, " ".join("%.9g" % v for v in flat))


def adagrad():
    w = torch.nn.Parameter(torch.tensor(initial()))
    opt = torch.optim.Adagrad([w], lr=LR, lr_decay=0.0,
                              initial_accumulator_value=0.1, eps=1e-7)
    for t in range(1, STEPS + 1):
        rows = TOUCHED[t]
        values = torch.tensor(np.stack([gradient(t, r) for r in rows]))
        w.grad = torch.sparse_coo_tensor([rows], values, (ROWS, WIDTH))
        opt.step()
    emit("adagrad", "w", w.detach().numpy())
    emit("adagrad", "accumulator", opt.state[w]["sum"].numpy())


def lazy_adam():
    init = initial()
    params = [torch.nn.Parameter(torch.tensor(init[r:r + 1]))
              for r in range(ROWS)]
    opts = [torch.optim.SparseAdam([p], lr=LR, betas=(0.9, 0.999), eps=1e-7)
            for p in params]
    for t in range(1, STEPS + 1):
        for r in TOUCHED[t]:
            values = torch.tensor(gradient(t, r)).reshape(1, WIDTH)
            params[r].grad = torch.sparse_coo_tensor([[0]], values,
                                                     (1, WIDTH))
            opts[r].step()
    emit("lazy_adam", "w", np.concatenate([p.detach().numpy()
                                           for p in params]))
    emit("lazy_adam", "m", np.concatenate(
        [opts[r].state[params[r]]["exp_avg"].numpy() for r in range(ROWS)]))
    emit("lazy_adam", "v", np.concatenate(
        [opts[r].state[params[r]]["exp_avg_sq"].numpy()
         for r in range(ROWS)]))
    emit("lazy_adam", "t", [[float(opts[r].state[params[r]]["step"])] * WIDTH
                            for r in range(ROWS)])


def ftrl(case, power):
    l1, l2, shrinkage, beta, init_acc = 0.01, 0.02, 0.03, 0.5, 0.1
    l2_adjusted = l2 + beta / (2 * LR)
    w = initial().astype(np.float64)
    n = np.full((ROWS, WIDTH), init_acc)
    z = np.zeros((ROWS, WIDTH))
    for t in range(1, STEPS + 1):
        for r in TOUCHED[t]:
            g = gradient(t, r).astype(np.float64)
            g_shrunk = g + 2 * shrinkage * w[r]
            n_new = n[r] + g * g
            z[r] += g_shrunk - (n_new ** -power - n[r] ** -power) / LR * w[r]
            n[r] = n_new
            quadratic = n_new ** -power / LR + 2 * l2_adjusted
            w[r] = np.where(np.abs(z[r]) > l1,
                            (np.sign(z[r]) * l1 - z[r]) / quadratic, 0.0)
    emit(case, "w", w)
    emit(case, "accumulator", n)
    emit(case, "linear", z)


if __name__ == "__main__":
    adagrad()
    lazy_adam()
    ftrl("ftrl", -0.5)
    ftrl("ftrl_p07", -0.7)
