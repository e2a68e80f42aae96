#!/usr/bin/python3
"""Writes attention_reference.json: Keras 3 MultiHeadAttention computed by
PyTorch (1.13, float64, autograd) from random float32 inputs and weights, for
//compute/cpu:attention_reference_test.

The computation follows Keras 3's own einsum equations for rank-3 inputs
(keras/src/layers/attention/multi_head_attention.py: _build_proj_equation and
_build_attention_equation), its variable shapes, its scaling of the query by
1/sqrt(key_dim) before the dot product, and its causal mask as -1e9 added to
the masked scores before the softmax. Run with Debian's Python (the pyenv
shim on the PATH does not see python3-torch):

  /usr/bin/python3 compute/cpu/testdata/attention_reference.py \
      > compute/cpu/testdata/attention_reference.json
"""

import json
import math
import sys

import torch

CASES = [
    # Cross-attention with every size different, biases, causal mask with a
    # query shorter than the key/value sequence.
    dict(name="cross_causal", batch=2, tq=3, tv=4, dq=4, dk=3, dv=5, heads=2,
         key_dim=3, value_dim=2, output_dim=6, use_bias=True, causal=True,
         self_attention=False),
    # Self-attention (query = key = value), no biases, Keras's defaults for
    # value_dim (key_dim) and output_dim (dq).
    dict(name="self_no_bias", batch=2, tq=4, tv=4, dq=6, dk=6, dv=6, heads=3,
         key_dim=2, value_dim=2, output_dim=6, use_bias=False, causal=False,
         self_attention=True),
    # Self-attention with causal mask and biases.
    dict(name="self_causal", batch=1, tq=5, tv=5, dq=4, dk=4, dv=4, heads=2,
         key_dim=3, value_dim=3, output_dim=4, use_bias=True, causal=True,
         self_attention=True),
]


def variable_shapes(c):
    h, k, v = c["heads"], c["key_dim"], c["value_dim"]
    shapes = [("query/kernel", [c["dq"], h, k]), ("query/bias", [h, k]),
              ("key/kernel", [c["dk"], h, k]), ("key/bias", [h, k]),
              ("value/kernel", [c["dv"], h, v]), ("value/bias", [h, v]),
              ("attention_output/kernel", [h, v, c["output_dim"]]),
              ("attention_output/bias", [c["output_dim"]])]
    return [(n, s) for n, s in shapes if c["use_bias"] or "bias" not in n]


def forward(c, query, key, value, w):
    def bias(name):
        return w[name] if c["use_bias"] else 0.0

    # EinsumDense "abc,cde->abde" with bias axes "de".
    q = torch.einsum("abc,cde->abde", query, w["query/kernel"]) + bias(
        "query/bias")
    k = torch.einsum("abc,cde->abde", key, w["key/kernel"]) + bias("key/bias")
    v = torch.einsum("abc,cde->abde", value, w["value/kernel"]) + bias(
        "value/bias")
    q = q * (1.0 / math.sqrt(c["key_dim"]))
    scores = torch.einsum("aecd,abcd->acbe", k, q)  # [B, H, Tq, Tv]
    if c["causal"]:
        rows = torch.arange(c["tq"]).reshape(-1, 1)
        cols = torch.arange(c["tv"]).reshape(1, -1)
        keep = (rows >= cols).to(scores.dtype)
        scores = scores + (1.0 - keep) * -1e9
    probs = torch.softmax(scores, dim=-1)
    context = torch.einsum("acbe,aecd->abcd", probs, v)  # [B, Tq, H, Dv]
    # EinsumDense "abcd,cde->abe" with bias axes "e".
    return torch.einsum("abcd,cde->abe", context,
                        w["attention_output/kernel"]) + bias(
                            "attention_output/bias")


def run_case(c, generator):
    def rand(shape, scale=1.0):
        values = (torch.rand(shape, generator=generator) * 2 - 1) * scale
        return values.to(torch.float32).to(torch.float64)

    b = c["batch"]
    query = rand([b, c["tq"], c["dq"]])
    key = query if c["self_attention"] else rand([b, c["tv"], c["dk"]])
    value = query if c["self_attention"] else rand([b, c["tv"], c["dv"]])
    w = {n: rand(s, 0.8) for n, s in variable_shapes(c)}
    dy = rand([b, c["tq"], c["output_dim"]])
    leaves = dict(w)
    if c["self_attention"]:
        leaves["query"] = query
    else:
        leaves.update(query=query, key=key, value=value)
    for t in leaves.values():
        t.requires_grad_(True)
    y = forward(c, query, key, value, w)
    (y * dy).sum().backward()

    def flat(t):
        return t.detach().reshape(-1).tolist()

    return dict(
        shape={k: c[k] for k in c if k != "name"},
        name=c["name"],
        inputs={n: flat(t) for n, t in
                (("query", query), ("key", key), ("value", value))},
        variables={n: flat(w[n]) for n, _ in variable_shapes(c)},
        dy=flat(dy),
        y=flat(y),
        # For self-attention "query" is the whole input gradient (all three
        # paths summed).
        gradients={n: flat(t.grad) for n, t in leaves.items()},
    )


def main():
    generator = torch.Generator().manual_seed(20261125)
    cases = [run_case(c, generator) for c in CASES]
    json.dump(dict(generator="compute/cpu/testdata/attention_reference.py, "
                   "torch " + torch.__version__, cases=cases),
              sys.stdout, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
