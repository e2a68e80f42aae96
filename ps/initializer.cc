#include "ps/initializer.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/derived_seed.h"

namespace pstrain {
namespace ps {
namespace {

// A counter-based generator (SplitMix64), so that row r's stream is
// independent of every other row's.
class RowStream {
 public:
  RowStream(uint64_t seed, int64_t row)
      : state_(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(row)))) {}

  // Uniform in [0, 1) with 53 random bits.
  double Uniform() {
    state_ = SplitMix64(state_);
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

// OK when `kind` (its proto field name) may fill a variable of `def`'s rank
// (at least `min_rank`, at most `max_rank`) that is not sparse.
absl::Status CheckMatrixKind(const VariableDef& def, absl::string_view kind,
                             int min_rank, int max_rank) {
  const int rank = def.shape().dims_size();
  if (rank < min_rank || rank > max_rank) {
    return Bad(def, absl::StrCat(kind, " needs a variable of rank ",
                                 min_rank == max_rank ? "" : ">= ", min_rank,
                                 ", got rank ", rank));
  }
  // An embedding row is filled alone on first touch; these values are a
  // property of the whole matrix.
  if (def.sparse()) {
    return Bad(def, absl::StrCat(kind,
                                 " is not supported for a sparse (embedding) "
                                 "variable"));
  }
  return absl::OkStatus();
}

absl::Status CheckVarianceScaling(const VariableDef& def) {
  const Initializer::VarianceScaling& v = def.initializer().variance_scaling();
  if (!std::isfinite(v.scale()) || !(v.scale() > 0)) {
    return Bad(def, absl::StrCat("variance_scaling scale ", v.scale(),
                                 " must be finite and > 0"));
  }
  if (v.mode() == Initializer::VarianceScaling::MODE_UNSPECIFIED ||
      !Initializer::VarianceScaling::Mode_IsValid(v.mode())) {
    return Bad(def, absl::StrCat("variance_scaling mode ", v.mode(),
                                 " is not FAN_IN, FAN_OUT or FAN_AVG"));
  }
  if (v.distribution() ==
          Initializer::VarianceScaling::DISTRIBUTION_UNSPECIFIED ||
      !Initializer::VarianceScaling::Distribution_IsValid(v.distribution())) {
    return Bad(def,
               absl::StrCat("variance_scaling distribution ", v.distribution(),
                            " is not TRUNCATED_NORMAL, "
                            "UNTRUNCATED_NORMAL or UNIFORM"));
  }
  return absl::OkStatus();
}

// How the random kinds draw each element: uniform in [a, b), or a + b * z
// for z standard normal (truncated: redrawn while |z| > 2).
struct Draw {
  enum Kind { kUniform, kNormal, kTruncatedNormal } kind;
  double a;
  double b;
};

Draw VarianceScalingDraw(const VariableDef& def) {
  const Initializer::VarianceScaling& v = def.initializer().variance_scaling();
  double fan_in, fan_out;
  Fans(def, &fan_in, &fan_out);
  double n = fan_in;
  if (v.mode() == Initializer::VarianceScaling::FAN_OUT) n = fan_out;
  if (v.mode() == Initializer::VarianceScaling::FAN_AVG) {
    n = (fan_in + fan_out) / 2.0;
  }
  const double scale = v.scale() / std::max(1.0, n);
  switch (v.distribution()) {
    case Initializer::VarianceScaling::UNIFORM: {
      const double limit = std::sqrt(3.0 * scale);
      return {Draw::kUniform, -limit, limit};
    }
    case Initializer::VarianceScaling::UNTRUNCATED_NORMAL:
      return {Draw::kNormal, 0.0, std::sqrt(scale)};
    default:  // TRUNCATED_NORMAL
      // The standard deviation of a standard normal truncated to [-2, 2]:
      // dividing by it gives the drawn values a stddev of sqrt(scale).
      return {Draw::kTruncatedNormal, 0.0,
              std::sqrt(scale) / 0.87962566103423978};
  }
}

void FillRandomRows(const VariableDef& def, const Draw& draw, int64_t row_begin,
                    int64_t num_rows, float* out) {
  const int64_t width = RowElements(def);
  for (int64_t r = 0; r < num_rows; ++r) {
    RowStream stream(def.initializer().seed(), row_begin + r);
    float* row = out + r * width;
    for (int64_t i = 0; i < width; ++i) {
      double x;
      if (draw.kind == Draw::kUniform) {
        x = draw.a + (draw.b - draw.a) * stream.Uniform();
      } else {
        double z = stream.Normal();
        if (draw.kind == Draw::kTruncatedNormal) {
          while (std::fabs(z) > 2.0) z = stream.Normal();
        }
        x = draw.a + draw.b * z;
      }
      row[i] = static_cast<float>(x);
    }
  }
}

// Keras's Orthogonal for the whole variable, as a [rows, cols] matrix in
// row-major order (rows = the product of all dimensions but the last).
std::vector<double> OrthogonalMatrix(const VariableDef& def) {
  const auto& dims = def.shape().dims();
  int64_t rows = 1;
  for (int i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  const int64_t cols = dims[dims.size() - 1];
  const int64_t m = std::max(rows, cols);
  const int64_t n = std::min(rows, cols);
  // A, m x n, column-major (a[j * m + i]); row i of A from row i's stream.
  std::vector<double> a(m * n);
  for (int64_t i = 0; i < m; ++i) {
    RowStream stream(def.initializer().seed(), i);
    for (int64_t j = 0; j < n; ++j) a[j * m + i] = stream.Normal();
  }
  // Householder QR: reflection k maps A's column k (rows k..m-1) onto
  // diag[k] * e_k, with v_k kept in the columns of `v`. diag is R's diagonal.
  std::vector<double> v(m * n, 0.0);
  std::vector<double> diag(n, 0.0);
  for (int64_t k = 0; k < n; ++k) {
    double* x = &a[k * m];
    double norm = 0;
    for (int64_t i = k; i < m; ++i) norm += x[i] * x[i];
    norm = std::sqrt(norm);
    // alpha of the opposite sign to x[k], so that x - alpha e_k does not
    // cancel.
    const double alpha = x[k] > 0 ? -norm : norm;
    diag[k] = alpha;
    double* vk = &v[k * m];
    double vnorm = 0;
    for (int64_t i = k; i < m; ++i) {
      vk[i] = x[i] - (i == k ? alpha : 0.0);
      vnorm += vk[i] * vk[i];
    }
    if (vnorm == 0) continue;  // x is 0 (probability 0): no reflection.
    vnorm = std::sqrt(vnorm);
    for (int64_t i = k; i < m; ++i) vk[i] /= vnorm;
    for (int64_t j = k; j < n; ++j) {
      double* c = &a[j * m];
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += vk[i] * c[i];
      for (int64_t i = k; i < m; ++i) c[i] -= 2 * dot * vk[i];
    }
  }
  // Thin Q = H_0 ... H_{n-1} applied to the first n columns of I, reusing
  // `a`. Column j of that identity is untouched by H_k for k > j.
  std::fill(a.begin(), a.end(), 0.0);
  for (int64_t j = 0; j < n; ++j) a[j * m + j] = 1.0;
  for (int64_t k = n - 1; k >= 0; --k) {
    const double* vk = &v[k * m];
    for (int64_t j = k; j < n; ++j) {
      double* c = &a[j * m];
      double dot = 0;
      for (int64_t i = k; i < m; ++i) dot += vk[i] * c[i];
      for (int64_t i = k; i < m; ++i) c[i] -= 2 * dot * vk[i];
    }
  }
  // Q's columns times the signs of R's diagonal (the QR with R's diagonal
  // positive, whatever the factorization's own sign choices), times gain; Q
  // itself when rows >= cols, its transpose otherwise.
  const double gain = def.initializer().orthogonal().gain();
  std::vector<double> out(rows * cols);
  for (int64_t j = 0; j < n; ++j) {
    const double factor = diag[j] < 0 ? -gain : gain;
    for (int64_t i = 0; i < m; ++i) {
      const double q = factor * a[j * m + i];
      if (rows >= cols) {
        out[i * cols + j] = q;
      } else {
        out[j * cols + i] = q;
      }
    }
  }
  return out;
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
    case Initializer::kVarianceScaling:
      return CheckVarianceScaling(def);
    case Initializer::kRandomNormal: {
      const auto& n = init.random_normal();
      if (!std::isfinite(n.mean())) {
        return Bad(def, absl::StrCat("random_normal mean ", n.mean(),
                                     " is not finite"));
      }
      if (!std::isfinite(n.stddev()) || !(n.stddev() > 0)) {
        return Bad(def, absl::StrCat("random_normal stddev ", n.stddev(),
                                     " must be finite and > 0"));
      }
      return absl::OkStatus();
    }
    case Initializer::kOrthogonal:
      if (!std::isfinite(init.orthogonal().gain())) {
        return Bad(def,
                   absl::StrCat("orthogonal gain ", init.orthogonal().gain(),
                                " is not finite"));
      }
      return CheckMatrixKind(def, "orthogonal", 2, INT_MAX);
    case Initializer::kIdentity:
      if (!std::isfinite(init.identity().gain())) {
        return Bad(def, absl::StrCat("identity gain ", init.identity().gain(),
                                     " is not finite"));
      }
      return CheckMatrixKind(def, "identity", 2, 2);
    default:
      return Bad(def, "has no kind set");
  }
}

void FillRows(const VariableDef& def, int64_t row_begin, int64_t num_rows,
              float* out) {
  const Initializer& init = def.initializer();
  const int64_t width = RowElements(def);
  switch (init.kind_case()) {
    case Initializer::kConstant:
      std::fill(out, out + num_rows * width, init.constant().value());
      return;
    case Initializer::kRandomUniform:
      FillRandomRows(def,
                     {Draw::kUniform, init.random_uniform().minval(),
                      init.random_uniform().maxval()},
                     row_begin, num_rows, out);
      return;
    case Initializer::kGlorotUniform: {
      double fan_in, fan_out;
      Fans(def, &fan_in, &fan_out);
      const double limit = std::sqrt(6.0 / std::max(1.0, fan_in + fan_out));
      FillRandomRows(def, {Draw::kUniform, -limit, limit}, row_begin, num_rows,
                     out);
      return;
    }
    case Initializer::kTruncatedNormal:
      FillRandomRows(def,
                     {Draw::kTruncatedNormal, init.truncated_normal().mean(),
                      init.truncated_normal().stddev()},
                     row_begin, num_rows, out);
      return;
    case Initializer::kVarianceScaling:
      FillRandomRows(def, VarianceScalingDraw(def), row_begin, num_rows, out);
      return;
    case Initializer::kRandomNormal:
      FillRandomRows(def,
                     {Draw::kNormal, init.random_normal().mean(),
                      init.random_normal().stddev()},
                     row_begin, num_rows, out);
      return;
    case Initializer::kOrthogonal: {
      const std::vector<double> whole = OrthogonalMatrix(def);
      const double* first = whole.data() + row_begin * width;
      std::transform(first, first + num_rows * width, out,
                     [](double x) { return static_cast<float>(x); });
      return;
    }
    case Initializer::kIdentity: {
      const float gain = init.identity().gain();
      std::fill(out, out + num_rows * width, 0.0f);
      for (int64_t r = 0; r < num_rows; ++r) {
        const int64_t column = row_begin + r;
        if (column < width) out[r * width + column] = gain;
      }
      return;
    }
    default:  // zeros
      std::fill(out, out + num_rows * width, 0.0f);
      return;
  }
}

}  // namespace ps
}  // namespace pstrain
