// Writes the reference cases of compute/cpu/keras_reference_test.cc: for
// each model, its JSON as TensorFlow.js writes it (model.toJSON(), the
// tf.keras 2.x form), a fixed batch, fixed weights, and what TensorFlow.js's
// CPU backend computes from them in float32, in training mode: the sum over
// the batch of Keras's sparse categorical cross-entropy on the softmax
// output, the number of correct argmax predictions, every trained variable's
// gradient of that sum, and each BatchNormalization's batch statistics.
//
//   cd tests/reference && npm install && node keras_reference.mjs testdata
//
// Everything is deterministic: the values come from a seeded generator
// below, not from TF.js's initializers (those are only written into the
// JSON), so a rerun rewrites identical files.
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as tf from '@tensorflow/tfjs';

const TFJS_VERSION = '4.22.0';

// Mulberry32: a small seeded generator of uint32s (period 2^32), enough to
// fill tensors reproducibly; uniform() is a float32 in [lo, hi).
function makeRng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    next,
    uniform: (lo, hi) => Math.fround(lo + (hi - lo) * (next() / 4294967296)),
  };
}

// The shortest decimal that reads back as the same float32, as a number
// (so that JSON holds it without quotes).
function f32(v) {
  if (!Number.isFinite(v)) throw new Error(`not finite: ${v}`);
  for (let p = 1; p <= 9; ++p) {
    const s = Number(v.toPrecision(p));
    if (Math.fround(s) === v) return s;
  }
  throw new Error(`no float32 decimal for ${v}`);
}

function tensorEntry(shape, values) {
  return {shape, values: Array.from(values, f32)};
}

// Kernels: uniform in +-sqrt(6 / fan_in) (He-uniform's range: 0.087 for
// the 784-input Dense, so "about U(-0.1, 0.1)" there, and activations that
// stay of order 1 through the CNN); biases: uniform in +-0.05, not zeros,
// so that the bias paths are checked too. A normalization's gamma is
// uniform in [0.5, 1.5) (a scale near 1, as trained ones are; the bias rule
// would nearly zero the layer's output). The variables that are not trained
// (BatchNormalization's moving_mean and moving_variance) come after the
// trained ones, from the same stream: the mean uniform in +-0.5, the
// variance in [0.5, 1.5), away from the batch's statistics, so that a
// training step that normalized with them instead would fail.
function fixedWeights(model, seed) {
  const rng = makeRng(seed);
  const weights = {};
  for (const w of [...model.trainableWeights, ...model.nonTrainableWeights]) {
    const shape = w.shape;
    const n = shape.reduce((a, b) => a * b, 1);
    const isKernel = shape.length > 1;
    const fanIn = isKernel ? n / shape[shape.length - 1] : 1;
    const limit = isKernel ? Math.sqrt(6 / fanIn) : 0.05;
    const [lo, hi] = /\/(gamma|moving_variance)$/.test(w.originalName) ?
        [0.5, 1.5] :
        /\/moving_mean$/.test(w.originalName) ? [-0.5, 0.5] :
                                                 [-limit, limit];
    const values = new Float32Array(n);
    for (let i = 0; i < n; ++i) values[i] = rng.uniform(lo, hi);
    w.write(tf.tensor(values, shape, 'float32'));
    weights[w.originalName] = tensorEntry(shape, values);
  }
  return weights;
}

// The model's output on the batch in TRAINING mode, as pstrain's TrainStep
// computes it: BatchNormalization normalizes with the batch's own
// statistics (and, in TF.js, moves its moving statistics, which no later
// computation here reads; the weights written are those before). The
// models have no dropout, so for those without BatchNormalization this is
// the inference-mode output too.
function forward(model, xs) {
  return model.apply(xs, {training: true});
}

// The batch's features as the model's inputs: one tensor per input
// (int32 for ids).
function inputTensors(batch) {
  const xs = batch.inputs.map(
      (input) => tf.tensor(input.features, input.shape,
                           input.ids ? 'int32' : 'float32'));
  return xs.length === 1 ? xs[0] : xs;
}

// Features in [0, 1) (ids, for an input an Embedding reads, uniform in
// [0, vocabulary)), input after input; labels in [0, classes), except that
// every even example is labelled with the model's own prediction, so that
// the count of correct predictions is not a trivial 0 (random weights guess
// right one time in ten) and the batch mixes small and large losses.
function fixedBatch(model, inputs, batch, seed) {
  const rng = makeRng(seed);
  const classes = model.outputs[0].shape[1];
  const tensors = inputs.map((input, k) => {
    const shape = [batch, ...input.shape];
    const n = shape.reduce((a, b) => a * b, 1);
    const features = new Float32Array(n);
    for (let i = 0; i < n; ++i) {
      features[i] = input.ids ? rng.next() % input.ids : rng.uniform(0, 1);
    }
    return {name: model.inputs[k].name, shape, features, ids: input.ids};
  });
  const result = {inputs: tensors, labels: []};
  const predicted = tf.tidy(
      () => tf.argMax(forward(model, inputTensors(result)), -1).dataSync());
  for (let i = 0; i < batch; ++i) {
    const random = rng.next() % classes;
    result.labels.push(i % 2 === 0 ? predicted[i] : random);
  }
  return result;
}

// Loss, accuracy and gradients of `model` on the batch. The loss is Keras's
// sparse categorical cross-entropy as TF.js's layers compute it from the
// probabilities (losses.sparseCategoricalCrossentropy: clip to
// [1e-7, 1 - 1e-7], one-hot the labels, categoricalCrossentropy, which
// renormalizes, clips and takes -sum(y log p)). That function is not
// exported, so its public part is called here: tf.metrics.
// categoricalCrossentropy (the same function as the categorical loss) on
// one-hot labels; the sparse form's first clip changes nothing while no
// probability is clipped, which is checked. The gradient is taken of the
// SUM of the per-example losses directly (what pstrain's backends push),
// rather than of the mean times the batch.
function expectedResults(model, batch, c) {
  const x = inputTensors(batch);
  const classes = model.outputs[0].shape[1];
  const y = tf.oneHot(tf.tensor1d(batch.labels, 'int32'), classes);
  const vars = model.trainableWeights.map((w) => w.read());
  const batchSize = batch.labels.length;
  // The layers' regularizers' penalty, as TF.js's layers compute it
  // (model.calculateLosses()): pstrain adds its gradient batch times to
  // the summed loss's (worker/backend.h), so the gradient taken is of
  // sum + batch * penalty.
  const penalty = () => {
    const losses = model.calculateLosses();
    return losses.length === 0 ? tf.scalar(0) : tf.addN(losses);
  };
  const probs = forward(model, x);
  const regularization = tf.tidy(() => penalty().dataSync()[0]);
  if (!c.gradients) {
    // Dilated convolutions: TF.js 4.22 has no gradient for them (its
    // Conv2D and DepthwiseConv2dNative gradients assert dilation 1), so
    // such a case checks the forward pass: the loss and the predictions.
    const value = tf.sum(tf.metrics.categoricalCrossentropy(y, probs));
    return finishExpected(model, x, batch, probs, value, null, vars,
                          regularization);
  }
  const {value, grads} = tf.variableGrads(
      () => tf.add(tf.sum(tf.metrics.categoricalCrossentropy(
                       y, forward(model, x))),
                   tf.mul(batchSize, penalty())),
      vars);
  // The loss alone, without the penalty.
  const lossSum = tf.sub(value, batchSize * regularization);
  return finishExpected(model, x, batch, probs, lossSum, grads, vars,
                        regularization);
}

function finishExpected(model, x, batch, probs, value, grads, vars,
                        regularization) {
  // pstrain computes the loss from the logits; TF.js from the clipped
  // probabilities. The two agree (gradients included) only while no
  // probability is clipped: refuse a case where one would be.
  for (const p of probs.dataSync()) {
    if (!(p > 1e-7 && p < 1 - 1e-7)) {
      throw new Error(`a probability (${p}) would be clipped`);
    }
  }
  const predicted = Array.from(tf.argMax(probs, -1).dataSync());
  const correct = predicted.filter((p, i) => p === batch.labels[i]).length;
  const expected = {loss_sum: f32(value.dataSync()[0]), correct};
  if (grads !== null) {
    const gradients = {};
    model.trainableWeights.forEach((w, i) => {
      const g = grads[vars[i].name];
      gradients[w.originalName] = tensorEntry(g.shape, g.dataSync());
    });
    expected.gradients = gradients;
  }
  if (regularization !== 0) expected.regularization = f32(regularization);
  const statistics = batchStatistics(model, x);
  if (Object.keys(statistics).length > 0) {
    expected.batch_statistics = statistics;
  }
  return expected;
}

// What a training step computes for each BatchNormalization's moving
// statistics: the mean and the variance of the layer's input over every
// axis but the last, as TF.js's training-mode BatchNormalization takes them
// (normalizeBatchInTraining: tf.moments, whose variance is the mean of
// squared deviations, i.e. biased, as Keras 3's). Keyed by the moving
// variables' names; the layer's input comes from a model of the same
// layers ending there.
function batchStatistics(model, x) {
  const statistics = {};
  for (const layer of model.layers) {
    if (layer.getClassName() !== 'BatchNormalization') continue;
    const upTo = tf.model({inputs: model.inputs, outputs: layer.input});
    const input = upTo.apply(x, {training: true});
    const axes = [...Array(input.rank - 1).keys()];
    const {mean, variance} = tf.moments(input, axes);
    statistics[`${layer.name}/moving_mean`] =
        tensorEntry(mean.shape, mean.dataSync());
    statistics[`${layer.name}/moving_variance`] =
        tensorEntry(variance.shape, variance.dataSync());
  }
  return statistics;
}

// The MLPs name their initializers, RandomUniform and Zeros, which TF.js
// writes under those names, rather than take TF.js's defaults: those (and
// even an explicit glorotUniform) are written as VarianceScaling, and the
// MLPs are to check the computation alone. The CNN keeps TF.js's defaults.
// The values used are the fixed ones either way.
const KERAS_INITIALIZERS = {
  kernelInitializer: tf.initializers.randomUniform({minval: -0.1, maxval: 0.1}),
  biasInitializer: 'zeros',
};

function mlpSequential() {
  const model = tf.sequential({name: 'mlp_sequential'});
  model.add(tf.layers.dense({
    name: 'dense',
    inputShape: [784],
    units: 64,
    activation: 'relu',
    ...KERAS_INITIALIZERS,
  }));
  model.add(tf.layers.dense({
    name: 'dense_1',
    units: 10,
    activation: 'softmax',
    ...KERAS_INITIALIZERS,
  }));
  return model;
}

// The same layers as mlp_sequential, through the functional API (TF.js
// writes class_name "Model", an InputLayer and inbound_nodes).
function mlpFunctional() {
  const input = tf.input({name: 'input', shape: [784]});
  const hidden = tf.layers
                     .dense({
                       name: 'dense',
                       units: 64,
                       activation: 'relu',
                       ...KERAS_INITIALIZERS,
                     })
                     .apply(input);
  const output = tf.layers
                     .dense({
                       name: 'dense_1',
                       units: 10,
                       activation: 'softmax',
                       ...KERAS_INITIALIZERS,
                     })
                     .apply(hidden);
  return tf.model({name: 'mlp_functional', inputs: input, outputs: output});
}

// TF.js's default initializers (written into the JSON as TF.js writes
// them); the values used are still the fixed ones.
function cnnSequential() {
  const model = tf.sequential({name: 'cnn_sequential'});
  model.add(tf.layers.conv2d({
    name: 'conv2d',
    inputShape: [28, 28, 1],
    filters: 8,
    kernelSize: 3,
    activation: 'relu',
    padding: 'same',
  }));
  model.add(tf.layers.maxPooling2d({name: 'max_pooling2d', poolSize: 2}));
  model.add(tf.layers.conv2d({
    name: 'conv2d_1',
    filters: 16,
    kernelSize: 3,
    strides: 2,
    activation: 'relu',
    padding: 'valid',
  }));
  model.add(tf.layers.flatten({name: 'flatten'}));
  model.add(tf.layers.dense({name: 'dense', units: 32, activation: 'relu'}));
  model.add(tf.layers.dense({name: 'dense_1', units: 10, activation: 'softmax'}));
  return model;
}

// A residual block (Functional: a branch and an Add): Conv2D(4, 3, same,
// no bias) -> BatchNormalization -> ReLU, then Conv2D(4, 3, same, no bias)
// -> BatchNormalization, added to the first ReLU's output -> ReLU (an
// Activation layer this time) -> GlobalAveragePooling2D -> Dense(10,
// softmax), on [8, 8, 2]. BatchNormalization in training mode: see forward().
function resnetBlock() {
  const input = tf.input({name: 'input', shape: [8, 8, 2]});
  const conv = (name) => tf.layers.conv2d({
    name,
    filters: 4,
    kernelSize: 3,
    padding: 'same',
    useBias: false,
  });
  let x = conv('conv2d').apply(input);
  x = tf.layers.batchNormalization({name: 'batch_normalization'}).apply(x);
  const shortcut = tf.layers.reLU({name: 're_lu'}).apply(x);
  x = conv('conv2d_1').apply(shortcut);
  x = tf.layers.batchNormalization({name: 'batch_normalization_1'}).apply(x);
  x = tf.layers.add({name: 'add'}).apply([x, shortcut]);
  x = tf.layers.activation({name: 'activation', activation: 'relu'}).apply(x);
  x = tf.layers.globalAveragePooling2d({name: 'global_average_pooling2d'})
          .apply(x);
  const output =
      tf.layers.dense({name: 'dense', units: 10, activation: 'softmax'})
          .apply(x);
  return tf.model({name: 'resnet_block', inputs: input, outputs: output});
}

// Two inputs: 'dense', 4 floats, and 'ids', 3 int32 ids that an
// Embedding(20, 4) reads; the embeddings flattened and concatenated after
// the floats -> Dense(8, tanh) -> Dense(3, softmax). pstrain feeds such a
// model one row per example, the inputs' elements in order (the 4 floats,
// then the 3 ids as exact floats): the C++ test packs the rows so.
function twoInput() {
  const dense = tf.input({name: 'dense', shape: [4]});
  const ids = tf.input({name: 'ids', shape: [3], dtype: 'int32'});
  const embedded =
      tf.layers.embedding({name: 'embedding', inputDim: 20, outputDim: 4})
          .apply(ids);
  const flat = tf.layers.flatten({name: 'flatten'}).apply(embedded);
  let x = tf.layers.concatenate({name: 'concatenate'}).apply([dense, flat]);
  x = tf.layers.dense({name: 'dense_1', units: 8, activation: 'tanh'})
          .apply(x);
  const output =
      tf.layers.dense({name: 'dense_2', units: 3, activation: 'softmax'})
          .apply(x);
  return tf.model({name: 'two_input', inputs: [dense, ids], outputs: output});
}

// Dense(8, relu) on each of the 6 rows of a [6, 5] input ->
// LayerNormalization(epsilon 1e-3) -> two branches, Dense(8, tanh) and
// Dense(8), multiplied -> GlobalAveragePooling1D -> Dense(4, softmax).
function layerNormMerge() {
  const input = tf.input({name: 'input', shape: [6, 5]});
  let x = tf.layers.dense({name: 'dense', units: 8, activation: 'relu'})
              .apply(input);
  x = tf.layers.layerNormalization({name: 'layer_normalization', epsilon: 1e-3})
          .apply(x);
  const a = tf.layers.dense({name: 'dense_1', units: 8, activation: 'tanh'})
                .apply(x);
  const b = tf.layers.dense({name: 'dense_2', units: 8}).apply(x);
  x = tf.layers.multiply({name: 'multiply'}).apply([a, b]);
  x = tf.layers.globalAveragePooling1d({name: 'global_average_pooling1d'})
          .apply(x);
  const output =
      tf.layers.dense({name: 'dense_3', units: 4, activation: 'softmax'})
          .apply(x);
  return tf.model({name: 'layer_norm_merge', inputs: input, outputs: output});
}

// TF.js 4.22 has no causal Conv1D (conv1dWithBias throws
// NotImplementedError); Keras defines it as the valid convolution of the
// input padded on the left with dilation_rate * (kernel_size - 1) zeros.
// causalConv1d builds that padding as Reshape -> ZeroPadding2D -> Reshape
// (layers named causal_pad_*) before a valid Conv1D, and
// foldCausalPadding rewrites the JSON into what Keras writes: the Conv1D
// with padding "causal" reading the padding's input.
function causalConv1d(x, args) {
  const [steps, channels] = x.shape.slice(1);
  const pad = (args.dilationRate ?? 1) * (args.kernelSize - 1);
  const prefix = `causal_pad_${args.name}`;
  let y = tf.layers.reshape({name: `${prefix}_a`,
                             targetShape: [1, steps, channels]}).apply(x);
  y = tf.layers.zeroPadding2d({name: `${prefix}_b`,
                               padding: [[0, 0], [pad, 0]]}).apply(y);
  y = tf.layers.reshape({name: `${prefix}_c`,
                         targetShape: [steps + pad, channels]}).apply(y);
  return tf.layers.conv1d({...args, padding: 'valid'}).apply(y);
}

// TF.js 4.22's DepthwiseConv2D.getConfig writes its depthwise_regularizer
// as its depthwise_constraint too (serializeConstraint of the
// regularizer); the models here have no constraints.
function clearDepthwiseConstraints(json) {
  for (const layer of json.config.layers) {
    if (layer.class_name === 'DepthwiseConv2D') {
      layer.config.depthwise_constraint = null;
    }
  }
  return json;
}

function foldCausalPadding(json) {
  const layers = json.config.layers;
  if (!layers.every((l) => l.name !== undefined)) return json;  // Sequential.
  const byName = new Map(layers.map((l) => [l.name, l]));
  const isPad = (name) => name.startsWith('causal_pad_');
  for (const layer of layers) {
    if (layer.class_name !== 'Conv1D') continue;
    let inbound = layer.inbound_nodes;
    if (!isPad(inbound[0][0][0])) continue;
    while (isPad(inbound[0][0][0])) {
      inbound = byName.get(inbound[0][0][0]).inbound_nodes;
    }
    layer.inbound_nodes = JSON.parse(JSON.stringify(inbound));
    layer.config.padding = 'causal';
  }
  json.config.layers = layers.filter((l) => !isPad(l.name));
  return json;
}

// DepthwiseConv2D(3, depth_multiplier 2, same; L1 on its kernel, L1L2 on
// its bias) -> Conv2D(4, 3, strides 2, relu; L1L2 on its kernel) on
// [9, 8, 3] -> Reshape [12, 4] -> Conv1D(5, 3, causal, tanh; L1 on its
// bias) -> Conv1D(3, 4, strides 2, same; L1 on its kernel) -> Flatten ->
// Dense(5, softmax). Gradients are of the summed loss plus batch times the
// penalty.
function convVariants() {
  const input = tf.input({name: 'input', shape: [9, 8, 3]});
  let x = tf.layers.depthwiseConv2d({
    name: 'depthwise_conv2d', kernelSize: 3, depthMultiplier: 2,
    padding: 'same',
    depthwiseRegularizer: tf.regularizers.l1({l1: 0.01}),
    biasRegularizer: tf.regularizers.l1l2({l1: 0.02, l2: 0.03}),
  }).apply(input);
  x = tf.layers.conv2d({
    name: 'conv2d', filters: 4, kernelSize: 3, strides: 2,
    activation: 'relu',
    kernelRegularizer: tf.regularizers.l1l2({l1: 0.005, l2: 0.01}),
  }).apply(x);
  x = tf.layers.reshape({name: 'reshape', targetShape: [12, 4]}).apply(x);
  x = causalConv1d(x, {
    name: 'conv1d', filters: 5, kernelSize: 3, activation: 'tanh',
    biasRegularizer: tf.regularizers.l1({l1: 0.05}),
  });
  x = tf.layers.conv1d({
    name: 'conv1d_1', filters: 3, kernelSize: 4, strides: 2,
    padding: 'same', kernelRegularizer: tf.regularizers.l1({l1: 0.02}),
  }).apply(x);
  x = tf.layers.flatten({name: 'flatten'}).apply(x);
  const output =
      tf.layers.dense({name: 'dense', units: 5, activation: 'softmax'})
          .apply(x);
  return tf.model({name: 'conv_variants', inputs: input, outputs: output});
}

// Dilated: Conv2D(4, 3, dilation 2, relu) on [10, 9, 2] ->
// DepthwiseConv2D(2, depth_multiplier 2, same; not dilated: TF.js 4.22's
// DepthwiseConv2D layer ignores dilationRate, "TODO(cais): Add support for
// dilation") -> Reshape
// [15, 16] -> Conv1D(4, 3, causal, dilation 2, tanh) -> Conv1D(3, 2,
// same, dilation 3) -> Flatten -> Dense(5, softmax), with an L1L2 kernel
// regularizer. Forward only (see expectedResults).
function dilatedConvs() {
  const input = tf.input({name: 'input', shape: [10, 9, 2]});
  let x = tf.layers.conv2d({
    name: 'conv2d', filters: 4, kernelSize: 3, dilationRate: 2,
    activation: 'relu',
    kernelRegularizer: tf.regularizers.l1l2({l1: 0.01, l2: 0.02}),
  }).apply(input);
  x = tf.layers.depthwiseConv2d({
    name: 'depthwise_conv2d', kernelSize: 2, depthMultiplier: 2,
    padding: 'same',
  }).apply(x);
  x = tf.layers.reshape({name: 'reshape', targetShape: [15, 16]}).apply(x);
  x = causalConv1d(x, {
    name: 'conv1d', filters: 4, kernelSize: 3, dilationRate: 2,
    activation: 'tanh',
  });
  x = tf.layers.conv1d({
    name: 'conv1d_1', filters: 3, kernelSize: 2, padding: 'same',
    dilationRate: 3,
  }).apply(x);
  x = tf.layers.flatten({name: 'flatten'}).apply(x);
  const output =
      tf.layers.dense({name: 'dense', units: 5, activation: 'softmax'})
          .apply(x);
  return tf.model({name: 'dilated_convs', inputs: input, outputs: output});
}

// The functional MLP shares mlp_sequential's seed: same layer names, same
// values, so its expected results must come out identical. `inputs`: per
// model input, its shape and, for ids, the vocabulary.
const CASES = [
  {name: 'mlp_sequential', build: mlpSequential, inputs: [{shape: [784]}], batch: 8, seed: 0},
  {name: 'mlp_functional', build: mlpFunctional, inputs: [{shape: [784]}], batch: 8, seed: 0},
  {name: 'cnn_sequential', build: cnnSequential, inputs: [{shape: [28, 28, 1]}], batch: 4, seed: 2},
  {name: 'resnet_block', build: resnetBlock, inputs: [{shape: [8, 8, 2]}], batch: 4, seed: 3},
  {name: 'two_input', build: twoInput, inputs: [{shape: [4]}, {shape: [3], ids: 20}], batch: 8, seed: 4},
  {name: 'layer_norm_merge', build: layerNormMerge, inputs: [{shape: [6, 5]}], batch: 8, seed: 5},
  {name: 'conv_variants', build: convVariants, inputs: [{shape: [9, 8, 3]}], batch: 6, seed: 6},
  {name: 'dilated_convs', build: dilatedConvs, inputs: [{shape: [10, 9, 2]}], batch: 6, seed: 7, gradients: false},
];
for (const c of CASES) c.gradients = c.gradients ?? true;

// JSON with one line per numeric array (the tensors), indented otherwise.
function serialize(value, indent = '') {
  if (Array.isArray(value) && value.every((v) => typeof v === 'number')) {
    return `[${value.map((v) => JSON.stringify(v)).join(', ')}]`;
  }
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const inner = indent + '  ';
  const items = Array.isArray(value) ?
      value.map((v) => inner + serialize(v, inner)) :
      Object.entries(value).map(
          ([k, v]) => `${inner}${JSON.stringify(k)}: ${serialize(v, inner)}`);
  if (items.length === 0) return Array.isArray(value) ? '[]' : '{}';
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  return `${open}\n${items.join(',\n')}\n${indent}${close}`;
}

async function main() {
  const outDir = process.argv[2];
  if (!outDir) {
    console.error('usage: node keras_reference.mjs <output directory>');
    process.exit(2);
  }
  if (tf.version.tfjs !== TFJS_VERSION) {
    throw new Error(`expected tfjs ${TFJS_VERSION}, found ${tf.version.tfjs}`);
  }
  await tf.setBackend('cpu');
  fs.mkdirSync(outDir, {recursive: true});
  for (const c of CASES) {
    const model = c.build();
    const weights = fixedWeights(model, 1000 + c.seed);
    const batch = fixedBatch(model, c.inputs, c.batch, 2000 + c.seed);
    // One input: its shape and features; several: each one's name, shape
    // and features, in the model's order.
    const features = (input) =>
        ({shape: input.shape, features: Array.from(input.features, f32)});
    const batchEntry = batch.inputs.length === 1 ?
        {...features(batch.inputs[0]), labels: batch.labels} :
        {
          inputs: batch.inputs.map((input) =>
                                       ({name: input.name, ...features(input)})),
          labels: batch.labels,
        };
    const record = {
      name: c.name,
      generator: 'tests/reference/keras_reference.mjs',
      tfjs_version: tf.version.tfjs,
      tfjs_backend: tf.getBackend(),
      loss: 'sparse categorical cross-entropy on the softmax output',
      model: clearDepthwiseConstraints(
          foldCausalPadding(JSON.parse(model.toJSON()))),
      batch: batchEntry,
      weights,
      expected: expectedResults(model, batch, c),
    };
    const file = path.join(outDir, `${c.name}.json`);
    fs.writeFileSync(file, serialize(record) + '\n');
    console.log(`${file}: loss_sum ${record.expected.loss_sum}, ` +
                `correct ${record.expected.correct}/${c.batch}`);
  }
}

await main();
