// A host tensor: element type, shape and one aligned, contiguous buffer in
// row-major order, and its conversion to and from the wire's TensorProto.
//
//   absl::StatusOr<Tensor> t = Tensor::Create(DT_FLOAT, {784, 200});
//   float* w = t->data<float>();
//   TensorProto proto;
//   ToProto(*t, &proto);                       // one copy into the message
//   absl::StatusOr<Tensor> back = FromProto(proto);  // validated, one copy out
//
// A Tensor owns its buffer and is move-only; Clone() copies explicitly. It is
// not safe for concurrent mutation; concurrent reads are fine.
#ifndef PSTRAIN_COMMON_TENSOR_H_
#define PSTRAIN_COMMON_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/tensor.pb.h"

namespace pstrain {

// Bytes per element of `dtype`; 0 for DT_INVALID and unknown values.
size_t DataTypeSize(DataType dtype);

// Keras-style name: "float32", "float16", "bfloat16", "float64", "int32",
// "int64", "uint8"; "invalid" otherwise.
absl::string_view DataTypeName(DataType dtype);

// The dtype named `name` (as DataTypeName writes it), or INVALID_ARGUMENT.
absl::StatusOr<DataType> DataTypeFromName(absl::string_view name);

// Number of elements of `shape`, or INVALID_ARGUMENT if a dimension is
// negative or the byte size (elements * element_size) would exceed 2^62.
absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape,
                                    size_t element_size);

// "[784, 200]".
std::string ShapeString(absl::Span<const int64_t> shape);

// A TensorShapeProto's dimensions.
std::vector<int64_t> ShapeDims(const TensorShapeProto& shape);

class Tensor {
 public:
  // Buffers are aligned for AVX-512 loads and cache lines.
  static constexpr size_t kAlignment = 64;

  // An empty tensor of DT_INVALID with no elements.
  Tensor() = default;

  // A tensor of `dtype` and `shape` with zero-filled contents, or
  // INVALID_ARGUMENT naming the bad dtype or dimension.
  static absl::StatusOr<Tensor> Create(DataType dtype,
                                       std::vector<int64_t> shape);

  Tensor(Tensor&&) = default;
  Tensor& operator=(Tensor&&) = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A deep copy.
  Tensor Clone() const;

  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  size_t num_bytes() const { return num_elements_ * DataTypeSize(dtype_); }
  // Elements per row (product of shape[1:]); 1 for a scalar.
  int64_t row_elements() const;

  // The buffer, kAlignment-aligned; nullptr when there are no elements.
  void* raw_data() { return buffer_.get(); }
  const void* raw_data() const { return buffer_.get(); }

  // The buffer as elements of T. REQUIRES: sizeof(T) == DataTypeSize(dtype()).
  template <typename T>
  T* data() {
    CheckElementSize(sizeof(T));
    return reinterpret_cast<T*>(buffer_.get());
  }
  template <typename T>
  const T* data() const {
    CheckElementSize(sizeof(T));
    return reinterpret_cast<const T*>(buffer_.get());
  }
  template <typename T>
  absl::Span<T> flat() {
    return absl::Span<T>(data<T>(), num_elements_);
  }
  template <typename T>
  absl::Span<const T> flat() const {
    return absl::Span<const T>(data<T>(), num_elements_);
  }

 private:
  struct AlignedFree {
    void operator()(char* p) const;
  };

  friend absl::Status FromProtoInto(const TensorProto& proto, Tensor* tensor);

  // Allocates without initializing (the caller fills every byte).
  Tensor(DataType dtype, std::vector<int64_t> shape, int64_t num_elements);
  void CheckElementSize(size_t size) const;

  DataType dtype_ = DT_INVALID;
  std::vector<int64_t> shape_;
  int64_t num_elements_ = 0;
  std::unique_ptr<char[], AlignedFree> buffer_;
};

// Writes all of `tensor` into `proto` (no slice, offset 0), copying the bytes
// once.
void ToProto(const Tensor& tensor, TensorProto* proto);

// Writes rows [begin, end) of `tensor` into `proto` as a slice of it: the
// proto's shape is the tensor's full shape. Copies those bytes once.
// REQUIRES: tensor has rank >= 1 and 0 <= begin <= end <= shape()[0].
void RowsToProto(const Tensor& tensor, int64_t begin, int64_t end,
                 TensorProto* proto);

// The data `proto` carries: all of it, or for a sliced proto the rows
// [slice.begin, slice.end) as a tensor of shape [end - begin, dims[1:]...].
// Validates dtype, dimensions, slice bounds and content size, and refuses a
// chunk (content_offset != 0 or a partial content), each with
// INVALID_ARGUMENT naming the problem. Copies the bytes once.
absl::StatusOr<Tensor> FromProto(const TensorProto& proto);

// As FromProto, but into `tensor`, whose buffer is reused when it already has
// the carried dtype and shape (a worker pulling into its parameters every
// step pays no allocation). On error `tensor` is unchanged.
absl::Status FromProtoInto(const TensorProto& proto, Tensor* tensor);

}  // namespace pstrain

#endif  // PSTRAIN_COMMON_TENSOR_H_
