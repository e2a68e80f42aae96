"""Recomputes a tests/reference/testdata case with PyTorch, as a second check
of what TensorFlow.js wrote: the loss sum (cross-entropy from the logits),
the correct count and every gradient of the sum, in float32 and float64.
Models that are a chain of layers (a Sequential model, or a functional one
whose layers each take the previous one's output): Dense, Conv2D, MaxPooling2D
(valid), Flatten, activations.

  /usr/bin/python3 tests/reference/check_with_torch.py tests/reference/testdata/*.json
"""
import json
import sys

import torch
import torch.nn.functional as F


def tensor(entry, dtype):
    return torch.tensor(entry["values"], dtype=dtype).reshape(entry["shape"])


def activate(x, name):
    if name in (None, "linear"):
        return x
    if name == "relu":
        return F.relu(x)
    if name == "softmax":
        return x  # the logits: the loss takes the softmax itself
    raise ValueError(f"activation {name}")


def same_padding(size, kernel, stride):
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2  # Keras puts the odd one after


def forward(record, weights, dtype):
    """The logits of a Sequential model, NHWC in, Keras layouts."""
    x = tensor({"values": record["batch"]["features"],
                "shape": record["batch"]["shape"]}, dtype)
    layers = record["model"]["config"]["layers"]
    for layer in layers:
        kind, c = layer["class_name"], layer["config"]
        name = c["name"]
        if kind == "InputLayer":
            continue
        if kind == "Dense":
            x = x @ weights[f"{name}/kernel"] + weights[f"{name}/bias"]
            x = activate(x, c["activation"])
        elif kind == "Conv2D":
            kernel = weights[f"{name}/kernel"]  # HWIO
            stride = c["strides"]
            h = x.permute(0, 3, 1, 2)  # NCHW
            if c["padding"] == "same":
                top, bottom = same_padding(h.shape[2], kernel.shape[0], stride[0])
                left, right = same_padding(h.shape[3], kernel.shape[1], stride[1])
                h = F.pad(h, (left, right, top, bottom))
            h = F.conv2d(h, kernel.permute(3, 2, 0, 1),
                         weights[f"{name}/bias"], stride=tuple(stride))
            x = activate(h.permute(0, 2, 3, 1), c["activation"])
        elif kind == "MaxPooling2D":
            if c["padding"] != "valid":
                raise ValueError("MaxPooling2D padding")
            h = F.max_pool2d(x.permute(0, 3, 1, 2), tuple(c["pool_size"]),
                             tuple(c["strides"]))
            x = h.permute(0, 2, 3, 1)
        elif kind == "Flatten":
            x = x.reshape(x.shape[0], -1)  # NHWC order, as Keras flattens
        elif kind in ("Activation", "ReLU"):
            x = activate(x, c.get("activation", "relu"))
        else:
            raise ValueError(f"layer {kind}")
    return x


def check(path, dtype):
    record = json.load(open(path))
    weights = {k: tensor(v, dtype).requires_grad_()
               for k, v in record["weights"].items()}
    labels = torch.tensor(record["batch"]["labels"])
    logits = forward(record, weights, dtype)
    loss = F.cross_entropy(logits, labels, reduction="sum")
    loss.backward()
    expected = record["expected"]
    correct = int((logits.argmax(-1) == labels).sum())
    worst = 0.0
    for k, w in weights.items():
        ref = tensor(expected["gradients"][k], torch.float64)
        diff = (w.grad.double() - ref).abs().max().item()
        worst = max(worst, diff / ref.abs().max().item())
    print(f"{path} ({dtype}): loss_sum {loss.item():.7g} vs {expected['loss_sum']}"
          f" (rel {abs(loss.item() - expected['loss_sum']) / expected['loss_sum']:.2g}),"
          f" correct {correct} vs {expected['correct']},"
          f" max |grad diff| / tensor max {worst:.2g}")
    return correct == expected["correct"] and worst < 1e-4


def main():
    ok = True
    for path in sys.argv[1:]:
        for dtype in (torch.float32, torch.float64):
            ok = check(path, dtype) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
