#include "ps/initializer.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace ps {
namespace {

// SplitMix64: a counter-based generator, so that row r's stream is
// independent of every other row's.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

class RowStream {
 public:
  RowStream(uint64_t seed, int64_t row)
      : state_(Mix(seed ^ Mix(static_cast<uint64_t>(row)))) {}

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() {
    state_ = Mix(state_);
    return (state_ >> 11) * (1.0 / 9007199254740992.0);
  }

  // Standard normal (Box-Muller; one value per call).
  double Normal() {
    double u1 = Uniform();
    while (u1 <= 0.0) u1 = Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

int64_t RowElements(const VariableDef& def) {
  int64_t n = 1;
  for (int i = 1; i < def.shape().dims_size(); ++i) n *= def.shape().dims(i);
  return n;
}

// Keras's _compute_fans.
void Fans(const VariableDef& def, double* fan_in, double* fan_out) {
  const auto& d = def.shape().dims();
  const int rank = d.size();
  if (rank == 0) {
    *fan_in = *fan_out = 1;
  } else if (rank == 1) {
    *fan_in = *fan_out = d[0];
  } else if (rank == 2) {
    *fan_in = d[0];
    *fan_out = d[1];
  } else {
    double receptive = 1;
    for (int i = 0; i < rank - 2; ++i) receptive *= d[i];
    *fan_in = d[rank - 2] * receptive;
    *fan_out = d[rank - 1] * receptive;
  }
}

absl::Status Bad(const VariableDef& def, absl::string_view problem) {
  return absl::InvalidArgumentError(
      absl::StrCat("variable '", def.name(), "': initializer ", problem));
}

}  // namespace

absl::Status CheckInitializer(const VariableDef& def) {
  const Initializer& init = def.initializer();
  switch (init.kind_case()) {
    case Initializer::kZeros:
    case Initializer::kGlorotUniform:
      return absl::OkStatus();
    case Initializer::kConstant:
      if (!std::isfinite(init.constant().value())) {
        return Bad(def, "constant.value is not finite");
      }
      return absl::OkStatus();
    case Initializer::kRandomUniform: {
      const auto& u = init.random_uniform();
      if (!std::isfinite(u.minval()) || !std::isfinite(u.maxval()) ||
          !(u.minval() < u.maxval())) {
        return Bad(def, absl::StrCat("random_uniform [", u.minval(), ", ",
                                     u.maxval(), ") is not a finite range"));
      }
      return absl::OkStatus();
    }
    case Initializer::kTruncatedNormal: {
      const auto& n = init.truncated_normal();
      if (!std::isfinite(n.mean()) || !std::isfinite(n.stddev()) ||
          !(n.stddev() > 0)) {
        return Bad(def, absl::StrCat("truncated_normal stddev ", n.stddev(),
                                     " must be finite and > 0"));
      }
      return absl::OkStatus();
    }
    default:
      return Bad(def, "has no kind set");
  }
}

void FillRows(const VariableDef& def, int64_t row_begin, int64_t num_rows,
              float* out) {
  const Initializer& init = def.initializer();
  const int64_t width = RowElements(def);
  double low = 0, high = 0;
  switch (init.kind_case()) {
    case Initializer::kConstant:
      std::fill(out, out + num_rows * width, init.constant().value());
      return;
    case Initializer::kRandomUniform:
      low = init.random_uniform().minval();
      high = init.random_uniform().maxval();
      break;
    case Initializer::kGlorotUniform: {
      double fan_in, fan_out;
      Fans(def, &fan_in, &fan_out);
      high = std::sqrt(6.0 / std::max(1.0, fan_in + fan_out));
      low = -high;
      break;
    }
    case Initializer::kTruncatedNormal:
      break;
    default:  // zeros
      std::fill(out, out + num_rows * width, 0.0f);
      return;
  }
  for (int64_t r = 0; r < num_rows; ++r) {
    RowStream stream(init.seed(), row_begin + r);
    float* row = out + r * width;
    if (init.kind_case() == Initializer::kTruncatedNormal) {
      const double mean = init.truncated_normal().mean();
      const double stddev = init.truncated_normal().stddev();
      for (int64_t i = 0; i < width; ++i) {
        double z = stream.Normal();
        while (std::fabs(z) > 2.0) z = stream.Normal();
        row[i] = static_cast<float>(mean + stddev * z);
      }
    } else {
      for (int64_t i = 0; i < width; ++i) {
        row[i] = static_cast<float>(low + (high - low) * stream.Uniform());
      }
    }
  }
}

}  // namespace ps
}  // namespace pstrain
