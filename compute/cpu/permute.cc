#include "compute/cpu/permute.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compute/cpu/dnnl_util.h"

namespace pstrain {
namespace worker {
namespace cpu {
namespace {

using dnnl::memory;

// oneDNN's DNNL_MAX_NDIMS, less the batch axis.
constexpr int kMaxAxes = DNNL_MAX_NDIMS - 1;

// Row-major strides of `dims`.
memory::dims DenseStrides(const memory::dims& dims) {
  memory::dims strides(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return strides;
}

memory::desc StridedDesc(const memory::dims& dims,
                         const memory::dims& strides) {
  return memory::desc(dims, memory::data_type::f32, strides);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PermuteOp>> PermuteOp::Create(
    const PermuteShape& shape, Engine* engine) {
  absl::Status status = CheckPositive("Permute", {{"batch", shape.batch}});
  if (!status.ok()) return status;
  const int k = static_cast<int>(shape.in_dims.size());
  if (k == 0 || k > kMaxAxes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Permute: needs 1 to ", kMaxAxes, " axes besides the batch, got ", k));
  }
  for (int j = 0; j < k; ++j) {
    if (shape.in_dims[j] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("Permute: in_dims[", j,
                                                     "] must be positive, got ",
                                                     shape.in_dims[j]));
    }
  }
  std::vector<bool> seen(k, false);
  bool is_permutation = static_cast<int>(shape.dims.size()) == k;
  for (size_t i = 0; is_permutation && i < shape.dims.size(); ++i) {
    const int axis = shape.dims[i];
    is_permutation = axis >= 1 && axis <= k && !seen[axis - 1];
    if (is_permutation) seen[axis - 1] = true;
  }
  if (!is_permutation) {
    return absl::InvalidArgumentError(
        absl::StrCat("Permute: dims must be a permutation of 1..", k,
                     " (1-based, as "
                     "Keras), got (",
                     absl::StrJoin(shape.dims, ", "), ")"));
  }
  std::vector<int64_t> out_dims(k);
  for (int i = 0; i < k; ++i) out_dims[i] = shape.in_dims[shape.dims[i] - 1];
  std::unique_ptr<PermuteOp> op(
      new PermuteOp(shape, std::move(out_dims), engine));
  status = op->Init();
  if (!status.ok()) return status;
  return op;
}

absl::Status PermuteOp::Init() {
  return Guard("Permute: create", [&]() -> absl::Status {
    engine_->UseThreads();
    const dnnl::engine& e = engine_->dnnl_engine();
    const size_t k = out_dims_.size();
    // Full shapes with the batch axis in front, and their dense strides.
    memory::dims in_shape = {shape_.batch}, out_shape = {shape_.batch};
    in_shape.insert(in_shape.end(), shape_.in_dims.begin(),
                    shape_.in_dims.end());
    out_shape.insert(out_shape.end(), out_dims_.begin(), out_dims_.end());
    const memory::dims in_strides = DenseStrides(in_shape);
    const memory::dims out_strides = DenseStrides(out_shape);

    // x seen in the output's axis order: output axis i (1-based, after the
    // batch) steps through input axis dims[i - 1].
    memory::dims x_as_out = {in_strides[0]};
    // dy seen in the input's axis order: input axis j steps through the
    // output axis that takes it.
    memory::dims dy_as_in(k + 1);
    dy_as_in[0] = out_strides[0];
    for (size_t i = 0; i < k; ++i) {
      const int j = shape_.dims[i];  // 1-based input axis = index in in_shape.
      x_as_out.push_back(in_strides[j]);
      dy_as_in[j] = out_strides[i + 1];
    }
    memory::desc x_md = StridedDesc(out_shape, x_as_out);
    memory::desc y_md = StridedDesc(out_shape, out_strides);
    memory::desc dy_md = StridedDesc(in_shape, dy_as_in);
    memory::desc dx_md = StridedDesc(in_shape, in_strides);
    dnnl::primitive_attr attr = UserScratchpadAttr();

    x_mem_ = UserMemory(x_md, e);
    y_mem_ = UserMemory(y_md, e);
    dy_mem_ = UserMemory(dy_md, e);
    dx_mem_ = UserMemory(dx_md, e);

    dnnl::reorder::primitive_desc fwd_pd(e, x_md, e, y_md, attr);
    fwd_ = dnnl::reorder(fwd_pd);
    fwd_args_ = {{DNNL_ARG_FROM, x_mem_}, {DNNL_ARG_TO, y_mem_}};
    AddScratchpad(fwd_pd, e, &fwd_args_);

    dnnl::reorder::primitive_desc bwd_pd(e, dy_md, e, dx_md, attr);
    bwd_ = dnnl::reorder(bwd_pd);
    bwd_args_ = {{DNNL_ARG_FROM, dy_mem_}, {DNNL_ARG_TO, dx_mem_}};
    AddScratchpad(bwd_pd, e, &bwd_args_);
    return absl::OkStatus();
  });
}

absl::Status PermuteOp::Forward(const float* x, float* y) {
  if (x == nullptr || y == nullptr) {
    return absl::InvalidArgumentError("Permute forward: x and y are required");
  }
  return Guard("Permute forward", [&]() -> absl::Status {
    SetHandle(x_mem_, x);
    SetHandle(y_mem_, y);
    return engine_->Execute("Permute forward", fwd_, fwd_args_);
  });
}

absl::Status PermuteOp::Backward(const float* dy, float* dx) {
  if (dy == nullptr || dx == nullptr) {
    return absl::InvalidArgumentError(
        "Permute backward: dy and dx are required");
  }
  return Guard("Permute backward", [&]() -> absl::Status {
    SetHandle(dy_mem_, dy);
    SetHandle(dx_mem_, dx);
    return engine_->Execute("Permute backward", bwd_, bwd_args_);
  });
}

}  // namespace cpu
}  // namespace worker
}  // namespace pstrain
