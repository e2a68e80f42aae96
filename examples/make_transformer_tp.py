#!/usr/bin/env python3
"""Writes examples/transformer_tp.keras3.json: a small Transformer encoder
over token ids, in Keras 3's model.to_json() form (as the other examples),
for tensor model parallelism (README "Tensor model parallelism"; its layout
map is examples/transformer_tp.layout.json).

  ids [8] int32 -> Embedding(256, 32) -> MultiHeadAttention(4 heads, key_dim
  8) -> Dropout(0.1) -> Add(embedding) -> LayerNormalization -> Dense(64,
  gelu) -> Dropout(0.1) -> Dense(32) -> Add -> LayerNormalization ->
  GlobalAveragePooling1D -> Dense(10, softmax)

    examples/make_transformer_tp.py > examples/transformer_tp.keras3.json
"""
import json

SEQ, VOCAB, D, HEADS, KEY_DIM, HIDDEN, CLASSES = 8, 256, 32, 4, 8, 64, 10
DTYPE = {"module": "keras", "class_name": "DTypePolicy",
         "config": {"name": "float32"}, "registered_name": None}


def init(name, config=None):
    return {"module": "keras.initializers", "class_name": name,
            "config": config or {}, "registered_name": None}


def tensor(layer, shape, dtype="float32"):
    return {"class_name": "__keras_tensor__",
            "config": {"shape": [None] + shape, "dtype": dtype,
                       "keras_history": [layer, 0, 0]}}


def layer(class_name, name, config, args, build):
    config = dict({"name": name, "trainable": True, "dtype": DTYPE}, **config)
    return {"module": "keras.layers", "class_name": class_name,
            "config": config, "registered_name": None,
            "build_config": build, "name": name,
            "inbound_nodes": [{"args": args, "kwargs": {}}]}


def dense(name, units, activation, source, width):
    return layer("Dense", name, {
        "units": units, "activation": activation, "use_bias": True,
        "kernel_initializer": init("GlorotUniform", {"seed": None}),
        "bias_initializer": init("Zeros"), "kernel_regularizer": None,
        "bias_regularizer": None, "kernel_constraint": None,
        "bias_constraint": None, "quantization_config": None},
        [tensor(source, [SEQ, width] if source != "pool" else [width])],
        {"input_shape": [None, SEQ, width] if source != "pool"
         else [None, width]})


def dropout(name, source, width):
    return layer("Dropout", name, {"rate": 0.1, "seed": None,
                                   "noise_shape": None},
                 [tensor(source, [SEQ, width])],
                 {"input_shape": [None, SEQ, width]})


def add(name, a, b):
    return layer("Add", name, {}, [[tensor(a, [SEQ, D]), tensor(b, [SEQ, D])]],
                 {"input_shape": [[None, SEQ, D], [None, SEQ, D]]})


def norm(name, source):
    return layer("LayerNormalization", name, {
        "axis": -1, "epsilon": 1e-06, "center": True, "scale": True,
        "rms_scaling": False, "beta_initializer": init("Zeros"),
        "gamma_initializer": init("Ones"), "beta_regularizer": None,
        "gamma_regularizer": None, "beta_constraint": None,
        "gamma_constraint": None}, [tensor(source, [SEQ, D])],
        {"input_shape": [None, SEQ, D]})


layers = [
    {"module": "keras.layers", "class_name": "InputLayer",
     "config": {"batch_shape": [None, SEQ], "dtype": "int32",
                "sparse": False, "ragged": False, "name": "ids",
                "optional": False},
     "registered_name": None, "name": "ids", "inbound_nodes": []},
    layer("Embedding", "embedding", {
        "input_dim": VOCAB, "output_dim": D,
        "embeddings_initializer": init("RandomUniform", {
            "minval": -0.05, "maxval": 0.05, "seed": None}),
        "embeddings_regularizer": None, "activity_regularizer": None,
        "embeddings_constraint": None, "mask_zero": False},
        [tensor("ids", [SEQ], "int32")], {"input_shape": [None, SEQ]}),
    layer("MultiHeadAttention", "attention", {
        "num_heads": HEADS, "key_dim": KEY_DIM, "value_dim": KEY_DIM,
        "dropout": 0.0, "use_bias": True, "use_gate": False,
        "output_shape": None, "attention_axes": None,
        "sliding_window": None,
        "kernel_initializer": init("GlorotUniform", {"seed": None}),
        "bias_initializer": init("Zeros"), "kernel_regularizer": None,
        "bias_regularizer": None, "activity_regularizer": None,
        "kernel_constraint": None, "bias_constraint": None, "seed": None},
        [tensor("embedding", [SEQ, D]), tensor("embedding", [SEQ, D])],
        {"shapes_dict": {"query_shape": [None, SEQ, D],
                         "value_shape": [None, SEQ, D]}}),
    dropout("attention_dropout", "attention", D),
    add("attention_add", "embedding", "attention_dropout"),
    norm("attention_norm", "attention_add"),
    dense("ffn_hidden", HIDDEN, "gelu", "attention_norm", D),
    dropout("ffn_dropout", "ffn_hidden", HIDDEN),
    dense("ffn_output", D, "linear", "ffn_dropout", HIDDEN),
    add("ffn_add", "attention_norm", "ffn_output"),
    norm("ffn_norm", "ffn_add"),
    layer("GlobalAveragePooling1D", "pool",
          {"data_format": "channels_last", "keepdims": False},
          [tensor("ffn_norm", [SEQ, D])], {"input_shape": [None, SEQ, D]}),
    dense("predictions", CLASSES, "softmax", "pool", D),
]
model = {"module": "keras", "class_name": "Functional", "config": {
    "name": "transformer_tp", "trainable": True, "layers": layers,
    "input_layers": ["ids", 0, 0], "output_layers": ["predictions", 0, 0]},
    "registered_name": "Functional", "build_config": {"input_shape": None}}
print(json.dumps(model, indent=1))
