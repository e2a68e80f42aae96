// Writes the reference cases of worker/cpu/keras_reference_test.cc: for
// each model, its JSON as TensorFlow.js writes it (model.toJSON(), the
// tf.keras 2.x form), a fixed batch, fixed weights, and what TensorFlow.js's
// CPU backend computes from them in float32: the sum over the batch of
// Keras's sparse categorical cross-entropy on the softmax output, the number
// of correct argmax predictions, and every variable's gradient of that sum.
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
// so that the bias paths are checked too.
function fixedWeights(model, seed) {
  const rng = makeRng(seed);
  const weights = {};
  for (const w of model.trainableWeights) {
    const shape = w.shape;
    const n = shape.reduce((a, b) => a * b, 1);
    const isKernel = shape.length > 1;
    const fanIn = isKernel ? n / shape[shape.length - 1] : 1;
    const limit = isKernel ? Math.sqrt(6 / fanIn) : 0.05;
    const values = new Float32Array(n);
    for (let i = 0; i < n; ++i) values[i] = rng.uniform(-limit, limit);
    w.write(tf.tensor(values, shape, 'float32'));
    weights[w.originalName] = tensorEntry(shape, values);
  }
  return weights;
}

// Features in [0, 1); labels in [0, classes), except that every even
// example is labelled with the model's own prediction, so that the count of
// correct predictions is not a trivial 0 (random weights guess right one
// time in ten) and the batch mixes small and large losses.
function fixedBatch(model, inputShape, batch, seed) {
  const rng = makeRng(seed);
  const classes = model.outputs[0].shape[1];
  const shape = [batch, ...inputShape];
  const n = shape.reduce((a, b) => a * b, 1);
  const features = new Float32Array(n);
  for (let i = 0; i < n; ++i) features[i] = rng.uniform(0, 1);
  const predicted = tf.tidy(
      () => tf.argMax(model.predict(tf.tensor(features, shape)), -1)
                .dataSync());
  const labels = [];
  for (let i = 0; i < batch; ++i) {
    const random = rng.next() % classes;
    labels.push(i % 2 === 0 ? predicted[i] : random);
  }
  return {shape, features, labels};
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
function expectedResults(model, batch) {
  const x = tf.tensor(batch.features, batch.shape, 'float32');
  const classes = model.outputs[0].shape[1];
  const y = tf.oneHot(tf.tensor1d(batch.labels, 'int32'), classes);
  const vars = model.trainableWeights.map((w) => w.read());
  const {value, grads} = tf.variableGrads(
      () => tf.sum(tf.metrics.categoricalCrossentropy(
          y, model.apply(x, {training: false}))),
      vars);
  const probs = model.predict(x);
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
  const gradients = {};
  model.trainableWeights.forEach((w, i) => {
    const g = grads[vars[i].name];
    gradients[w.originalName] = tensorEntry(g.shape, g.dataSync());
  });
  return {loss_sum: f32(value.dataSync()[0]), correct, gradients};
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

// The functional MLP shares mlp_sequential's seed: same layer names, same
// values, so its expected results must come out identical.
const CASES = [
  {name: 'mlp_sequential', build: mlpSequential, input: [784], batch: 8, seed: 0},
  {name: 'mlp_functional', build: mlpFunctional, input: [784], batch: 8, seed: 0},
  {name: 'cnn_sequential', build: cnnSequential, input: [28, 28, 1], batch: 4, seed: 2},
];

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
    const batch = fixedBatch(model, c.input, c.batch, 2000 + c.seed);
    const record = {
      name: c.name,
      generator: 'tests/reference/keras_reference.mjs',
      tfjs_version: tf.version.tfjs,
      tfjs_backend: tf.getBackend(),
      loss: 'sparse categorical cross-entropy on the softmax output',
      model: JSON.parse(model.toJSON()),
      batch: {
        shape: batch.shape,
        features: Array.from(batch.features, f32),
        labels: batch.labels,
      },
      weights,
      expected: expectedResults(model, batch),
    };
    const file = path.join(outDir, `${c.name}.json`);
    fs.writeFileSync(file, serialize(record) + '\n');
    console.log(`${file}: loss_sum ${record.expected.loss_sum}, ` +
                `correct ${record.expected.correct}/${c.batch}`);
  }
}

await main();
