#!/usr/bin/python3
"""PyTorch's twins of bench/norm_attention_gpu (cuDNN and cuBLAS, FP32,
TF32 off), timed the same way on the same shapes: forward plus backward
with every gradient, the median over 5 runs of the mean of `iterations`
steps enqueued back to back (CUDA events), after a warm-up.

  python3 bench/norm_attention_torch.py [--batch 256] [--iterations 200]

BatchNorm1d over [batch * 28 * 28, 32] is the channels-last
BatchNormalization of pstrain ([rows, channels]); LayerNorm(64) over
[batch * 28, 64]; MultiheadAttention(64, 4 heads, batch_first) on
[batch, 28, 64] self-attention (head size 16, need_weights=False).
"""

import argparse
import statistics

import torch


def time_ms(step, iterations):
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    runs = []
    for _ in range(5):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            step()
        stop.record()
        stop.synchronize()
        runs.append(start.elapsed_time(stop) / iterations)
    return statistics.median(runs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=200)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    b = args.batch

    def bench(name, module, x):
        x = x.requires_grad_()
        y = module(x)
        y = y[0] if isinstance(y, tuple) else y
        dy = torch.randn_like(y)

        def step():
            out = module(x)
            out = out[0] if isinstance(out, tuple) else out
            out.backward(dy)

        print(f"{name}: {time_ms(step, args.iterations):.4f} ms")

    bench(f"BatchNorm1d [{b * 784}, 32] training fwd+bwd",
          torch.nn.BatchNorm1d(32, eps=1e-3).to(device),
          torch.randn(b * 784, 32, device=device))
    bench(f"LayerNorm [{b * 28}, 64] fwd+bwd",
          torch.nn.LayerNorm(64, eps=1e-3).to(device),
          torch.randn(b * 28, 64, device=device))
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True).to(device)
    x = torch.randn(b, 28, 64, device=device).requires_grad_()
    dy = torch.randn(b, 28, 64, device=device)

    def attention_step():
        out, _ = mha(x, x, x, need_weights=False)
        out.backward(dy)

    print(f"MultiheadAttention self [{b}, 28, 64], 4 heads of 16, fwd+bwd: "
          f"{time_ms(attention_step, args.iterations):.4f} ms")


if __name__ == "__main__":
    main()
