// Runs on any machine: the GPU kernels' arithmetic (kernel_math.h), compiled
// for the host, against the CPU ops it must reproduce. The GPU kernels run
// these same functions, one index per thread.
#include "compute/gpu/kernel_math.h"

#include <cstdint>
#include <random>
#include <vector>

#include "compute/cpu/dropout.h"
#include "compute/cpu/losses.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace worker {
namespace gpu {
namespace {

std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 generator(seed);
  std::vector<float> values(n);
  for (float& v : values) {
    v = static_cast<float>(lo + (hi - lo) * (generator() / 4294967296.0));
  }
  return values;
}

std::vector<int32_t> RandomLabels(int64_t n, int64_t classes, uint32_t seed) {
  std::mt19937 generator(seed);
  std::vector<int32_t> labels(n);
  for (int32_t& label : labels) label = generator() % classes;
  return labels;
}

void ExpectWords(const Philox4& got, uint32_t w0, uint32_t w1, uint32_t w2,
                 uint32_t w3) {
  EXPECT_EQ(got.word[0], w0);
  EXPECT_EQ(got.word[1], w1);
  EXPECT_EQ(got.word[2], w2);
  EXPECT_EQ(got.word[3], w3);
}

// The vectors compute/cpu/philox_test.cc checks (Random123's known answers).
TEST(KernelMathPhilox, MatchesRandom123KnownAnswers) {
  ExpectWords(Philox4x32(0, 0, 0, 0, 0, 0), 0x6627e8d5, 0xe169c58d, 0xbc57ac4c,
              0x9b00dbd8);
  ExpectWords(Philox4x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
                         0xffffffff, 0xffffffff),
              0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd);
  ExpectWords(Philox4x32(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344,
                         0xa4093822, 0x299f31d0),
              0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1);
}

// What LaunchDropoutForward's threads do together: every Philox block that
// the range [offset, offset + n) touches.
void DropoutAsTheKernelDoes(const std::vector<float>& x,
                            const cpu::DropoutKey& key, uint64_t threshold,
                            float scale, std::vector<uint8_t>* mask,
                            std::vector<float>* y) {
  const uint64_t n = x.size();
  mask->assign(n, 2);
  y->assign(n, -1.0f);
  for (uint64_t block = key.offset / 4; block <= (key.offset + n - 1) / 4;
       ++block) {
    DropoutForwardBlock(block, x.data(), n, key.offset, key.seed, key.step,
                        threshold, scale, mask->data(), y->data());
  }
}

TEST(KernelMathDropout, MaskAndOutputEqualTheCpuOpsForTheSameKey) {
  const int64_t n = 1003;  // Not a multiple of 4.
  const std::vector<float> x = RandomFloats(n, 3);
  for (float rate : {0.0f, 0.1f, 0.5f, 0.9f}) {
    for (uint64_t offset : {0ull, 1ull, 6ull, 4097ull}) {
      cpu::DropoutKey key;
      key.seed = 0x123456789abcdef0ull;  // Both 32-bit halves matter.
      key.step = (uint64_t{7} << 32) + 11;
      key.offset = offset;
      SCOPED_TRACE(testing::Message()
                   << "rate " << rate << " offset " << offset);
      absl::StatusOr<std::unique_ptr<cpu::DropoutOp>> cpu_op =
          cpu::DropoutOp::Create(n, rate);
      ASSERT_TRUE(cpu_op.ok()) << cpu_op.status();
      std::vector<float> cpu_y(n);
      ASSERT_TRUE((*cpu_op)->Forward(x.data(), key, cpu_y.data()).ok());

      // The GPU op computes its threshold and scale exactly as the CPU op.
      const uint64_t threshold = static_cast<uint64_t>(
          std::llround(static_cast<double>(rate) * 4294967296.0));
      std::vector<uint8_t> mask;
      std::vector<float> y;
      DropoutAsTheKernelDoes(x, key, threshold, (*cpu_op)->scale(), &mask, &y);
      EXPECT_EQ(mask, (*cpu_op)->mask());
      EXPECT_EQ(y, cpu_y);  // Bitwise.
    }
  }
}

TEST(KernelMathLosses, SoftmaxCrossEntropyEqualsTheCpuLoss) {
  const int64_t batch = 17, classes = 10;
  const std::vector<float> logits = RandomFloats(batch * classes, 5, -8, 8);
  const std::vector<int32_t> labels = RandomLabels(batch, classes, 6);
  std::vector<float> cpu_grad(batch * classes), grad(batch * classes);
  absl::StatusOr<double> cpu_loss = cpu::SparseSoftmaxCrossEntropyFromLogits(
      logits.data(), labels.data(), batch, classes, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += SoftmaxCrossEntropyRow(logits.data() + i * classes, labels[i],
                                   classes, grad.data() + i * classes);
  }
  EXPECT_EQ(loss, *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(KernelMathLosses, CrossEntropyFromProbabilitiesEqualsTheCpuLoss) {
  const int64_t batch = 9, classes = 5;
  std::vector<float> probs = RandomFloats(batch * classes, 7, 0, 1);
  // Values on both sides of Keras's clip range, and exactly on its bounds.
  probs[0] = 0.0f;
  probs[3] = 1e-9f;
  probs[7] = 1.0f;
  probs[11] = cpu::kKerasEpsilon;
  probs[12] = 1.0f - cpu::kKerasEpsilon;
  std::vector<int32_t> labels = RandomLabels(batch, classes, 8);
  labels[0] = 0;  // A clipped label probability.
  std::vector<float> cpu_grad(batch * classes), grad(batch * classes);
  absl::StatusOr<double> cpu_loss = cpu::SparseCrossEntropyFromProbabilities(
      probs.data(), labels.data(), batch, classes, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double loss = 0;
  for (int64_t i = 0; i < batch; ++i) {
    loss += CrossEntropyFromProbabilitiesRow(
        probs.data() + i * classes, labels[i], classes, cpu::kKerasEpsilon,
        1.0f - cpu::kKerasEpsilon, grad.data() + i * classes);
  }
  EXPECT_EQ(loss, *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(KernelMathLosses, SquaredErrorEqualsTheCpuLoss) {
  const int64_t batch = 6, outputs = 7;
  const std::vector<float> predictions = RandomFloats(batch * outputs, 9);
  const std::vector<float> targets = RandomFloats(batch * outputs, 10);
  std::vector<float> cpu_grad(batch * outputs), grad(batch * outputs);
  absl::StatusOr<double> cpu_loss = cpu::MeanSquaredErrorSum(
      predictions.data(), targets.data(), batch, outputs, cpu_grad.data());
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    total += SquaredErrorRow(predictions.data() + i * outputs,
                             targets.data() + i * outputs, outputs,
                             grad.data() + i * outputs);
  }
  // Summed per row, then over rows: the CPU adds all elements in one run.
  EXPECT_NEAR(total / outputs, *cpu_loss, 1e-12 * *cpu_loss);
  EXPECT_EQ(grad, cpu_grad);
}

TEST(KernelMathLosses, ArgMaxTakesTheFirstMaximumLikeCountCorrect) {
  const std::vector<float> scores = {0.1f, 0.7f, 0.7f, 0.2f,   // tie: 1
                                     0.9f, 0.1f, 0.0f, 0.9f,   // tie: 0
                                     -3.f, -2.f, -1.f, -4.f};  // 2
  EXPECT_EQ(ArgMaxRow(scores.data(), 4), 1);
  EXPECT_EQ(ArgMaxRow(scores.data() + 4, 4), 0);
  EXPECT_EQ(ArgMaxRow(scores.data() + 8, 4), 2);
  const std::vector<int32_t> labels = {1, 3, 2};
  absl::StatusOr<int64_t> cpu_correct =
      cpu::CountCorrect(scores.data(), labels.data(), 3, 4);
  ASSERT_TRUE(cpu_correct.ok());
  int64_t correct = 0;
  for (int i = 0; i < 3; ++i) {
    correct += ArgMaxRow(scores.data() + 4 * i, 4) == labels[i];
  }
  EXPECT_EQ(correct, *cpu_correct);
}

TEST(KernelMathLayout, PadPlacesTheInputAndCropInvertsIt) {
  PadGeometry g;
  g.height = 3;
  g.width = 4;
  g.channels = 2;
  g.top = 1;
  g.left = 0;
  g.padded_height = 5;  // One row above, one below.
  g.padded_width = 5;   // One column on the right.
  const int64_t batch = 2;
  const int64_t n = batch * g.height * g.width * g.channels;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
  std::vector<float> padded(batch * g.padded_height * g.padded_width *
                            g.channels);
  for (size_t p = 0; p < padded.size(); ++p) {
    const int64_t source = PadSourceIndex(p, g);
    padded[p] = source < 0 ? -1.0f : x[source];
  }
  // padded[b, h + top, w + left, c] == x[b, h, w, c]; the rest is fill.
  int64_t filled = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < g.padded_height; ++h) {
      for (int64_t w = 0; w < g.padded_width; ++w) {
        for (int64_t c = 0; c < g.channels; ++c) {
          const float value =
              padded[((b * g.padded_height + h) * g.padded_width + w) *
                         g.channels +
                     c];
          const int64_t sh = h - g.top, sw = w - g.left;
          if (sh < 0 || sh >= g.height || sw < 0 || sw >= g.width) {
            EXPECT_EQ(value, -1.0f);
            ++filled;
          } else {
            EXPECT_EQ(value,
                      x[((b * g.height + sh) * g.width + sw) * g.channels + c]);
          }
        }
      }
    }
  }
  EXPECT_EQ(filled, static_cast<int64_t>(padded.size()) - n);
  std::vector<float> cropped(n);
  for (int64_t i = 0; i < n; ++i) cropped[i] = padded[CropSourceIndex(i, g)];
  EXPECT_EQ(cropped, x);
}

TEST(KernelMathLayout, TransposeTurnsHwioIntoKrscAndBack) {
  const int64_t kh = 2, kw = 3, in = 4, out = 5;
  const int64_t rows = kh * kw * in, n = rows * out;
  std::vector<float> hwio(n);
  for (int64_t i = 0; i < n; ++i) hwio[i] = static_cast<float>(i);
  std::vector<float> krsc(n), back(n);
  for (int64_t o = 0; o < n; ++o)
    krsc[o] = hwio[TransposeSourceIndex(o, rows, out)];
  for (int64_t k = 0; k < out; ++k) {
    for (int64_t r = 0; r < kh; ++r) {
      for (int64_t s = 0; s < kw; ++s) {
        for (int64_t c = 0; c < in; ++c) {
          EXPECT_EQ(krsc[((k * kh + r) * kw + s) * in + c],
                    hwio[((r * kw + s) * in + c) * out + k]);
        }
      }
    }
  }
  for (int64_t o = 0; o < n; ++o)
    back[o] = krsc[TransposeSourceIndex(o, out, rows)];
  EXPECT_EQ(back, hwio);
}

}  // namespace
}  // namespace gpu
}  // namespace worker
}  // namespace pstrain
