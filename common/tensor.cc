#include "common/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain {

// The wire format is little-endian and tensors are copied as raw bytes.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "pstrain assumes a little-endian host");

namespace {

constexpr int64_t kMaxTensorBytes = int64_t{1} << 62;

struct DataTypeInfo {
  DataType dtype;
  size_t size;
  absl::string_view name;
};

constexpr DataTypeInfo kDataTypes[] = {
    {DT_FLOAT, 4, "float32"}, {DT_HALF, 2, "float16"},
    {DT_BFLOAT16, 2, "bfloat16"}, {DT_DOUBLE, 8, "float64"},
    {DT_INT32, 4, "int32"},   {DT_INT64, 8, "int64"},
    {DT_UINT8, 1, "uint8"},
};

const DataTypeInfo* FindDataType(DataType dtype) {
  for (const DataTypeInfo& info : kDataTypes) {
    if (info.dtype == dtype) return &info;
  }
  return nullptr;
}

}  // namespace

size_t DataTypeSize(DataType dtype) {
  const DataTypeInfo* info = FindDataType(dtype);
  return info == nullptr ? 0 : info->size;
}

absl::string_view DataTypeName(DataType dtype) {
  const DataTypeInfo* info = FindDataType(dtype);
  return info == nullptr ? "invalid" : info->name;
}

absl::StatusOr<DataType> DataTypeFromName(absl::string_view name) {
  for (const DataTypeInfo& info : kDataTypes) {
    if (info.name == name) return info.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype '", name,
      "' (expected float32, float16, bfloat16, float64, int32, int64 or "
      "uint8)"));
}

absl::StatusOr<int64_t> NumElements(absl::Span<const int64_t> shape,
                                    size_t element_size) {
  const int64_t limit = kMaxTensorBytes / static_cast<int64_t>(element_size);
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(shape), ": dimension ", i,
                       " is negative"));
    }
    if (shape[i] != 0 && n > limit / shape[i]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ", ShapeString(shape), ": more than 2^62 bytes"));
    }
    n *= shape[i];
  }
  return n;
}

std::vector<int64_t> ShapeDims(const TensorShapeProto& shape) {
  return std::vector<int64_t>(shape.dims().begin(), shape.dims().end());
}

std::string ShapeString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void Tensor::AlignedFree::operator()(char* p) const { std::free(p); }

Tensor::Tensor(DataType dtype, std::vector<int64_t> shape,
               int64_t num_elements)
    : dtype_(dtype), shape_(std::move(shape)), num_elements_(num_elements) {
  const size_t bytes = num_bytes();
  if (bytes == 0) return;
  // aligned_alloc wants a multiple of the alignment.
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  // Left null when the memory is not there: Create returns an error, Clone
  // aborts.
  buffer_.reset(static_cast<char*>(std::aligned_alloc(kAlignment, rounded)));
}

absl::StatusOr<Tensor> Tensor::Create(DataType dtype,
                                      std::vector<int64_t> shape) {
  const size_t size = DataTypeSize(dtype);
  if (size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid dtype ", static_cast<int>(dtype)));
  }
  absl::StatusOr<int64_t> n = NumElements(shape, size);
  if (!n.ok()) return n.status();
  Tensor tensor(dtype, std::move(shape), *n);
  if (tensor.num_bytes() > 0 && tensor.buffer_ == nullptr) {
    // Sizes come from requests and files: no memory is an error, not a crash.
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", tensor.num_bytes(),
                     " bytes for a tensor of shape ", ShapeString(tensor.shape_)));
  }
  if (tensor.num_bytes() > 0) std::memset(tensor.raw_data(), 0, tensor.num_bytes());
  return tensor;
}

Tensor Tensor::Clone() const {
  Tensor copy(dtype_, shape_, num_elements_);
  if (num_bytes() > 0 && copy.buffer_ == nullptr) {
    std::fprintf(stderr, "pstrain: out of memory copying %zu bytes\n",
                 num_bytes());
    std::abort();
  }
  if (num_bytes() > 0) std::memcpy(copy.raw_data(), raw_data(), num_bytes());
  return copy;
}

int64_t Tensor::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape_.size(); ++i) n *= shape_[i];
  return n;
}

void Tensor::CheckElementSize(size_t size) const {
  if (size != DataTypeSize(dtype_)) {
    std::fprintf(stderr,
                 "pstrain: Tensor::data<T>() with sizeof(T) %zu on a %s "
                 "tensor\n",
                 size, std::string(DataTypeName(dtype_)).c_str());
    std::abort();
  }
}

void ToProto(const Tensor& tensor, TensorProto* proto) {
  proto->Clear();
  proto->set_dtype(tensor.dtype());
  for (int64_t d : tensor.shape()) proto->mutable_shape()->add_dims(d);
  // assign() reuses the content's capacity; set_content() would build a
  // temporary string, a fresh allocation (and page faults) per call.
  proto->mutable_content()->assign(static_cast<const char*>(tensor.raw_data()),
                                   tensor.num_bytes());
}

void RowsToProto(const Tensor& tensor, int64_t begin, int64_t end,
                 TensorProto* proto) {
  if (tensor.shape().empty() || begin < 0 || begin > end ||
      end > tensor.shape()[0]) {
    std::fprintf(stderr, "pstrain: RowsToProto rows [%lld, %lld) of shape %s\n",
                 static_cast<long long>(begin), static_cast<long long>(end),
                 ShapeString(tensor.shape()).c_str());
    std::abort();
  }
  proto->Clear();
  proto->set_dtype(tensor.dtype());
  for (int64_t d : tensor.shape()) proto->mutable_shape()->add_dims(d);
  proto->mutable_slice()->set_begin(begin);
  proto->mutable_slice()->set_end(end);
  const size_t row_bytes = tensor.row_elements() * DataTypeSize(tensor.dtype());
  proto->mutable_content()->assign(
      static_cast<const char*>(tensor.raw_data()) + begin * row_bytes,
      (end - begin) * row_bytes);
}

absl::Status FromProtoInto(const TensorProto& proto, Tensor* tensor) {
  const size_t size = DataTypeSize(proto.dtype());
  if (size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor: invalid dtype ", static_cast<int>(proto.dtype())));
  }
  std::vector<int64_t> shape(proto.shape().dims().begin(),
                             proto.shape().dims().end());
  absl::StatusOr<int64_t> total = NumElements(shape, size);
  if (!total.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor: ", total.status().message()));
  }
  if (proto.has_slice()) {
    const int64_t begin = proto.slice().begin();
    const int64_t end = proto.slice().end();
    if (shape.empty() || begin < 0 || begin > end || end > shape[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor: slice rows [", begin, ", ", end,
          ") do not fit shape ", ShapeString(shape)));
    }
    shape[0] = end - begin;
  }
  absl::StatusOr<int64_t> n = NumElements(shape, size);
  if (!n.ok()) return n.status();
  const int64_t expected = *n * static_cast<int64_t>(size);
  if (proto.content_offset() != 0 ||
      static_cast<int64_t>(proto.content().size()) != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor: content holds ", proto.content().size(), " bytes at offset ",
        proto.content_offset(), "; a whole ", DataTypeName(proto.dtype()), " ",
        ShapeString(shape), " needs ", expected, " bytes at offset 0"));
  }
  if (tensor->dtype() != proto.dtype() || tensor->shape() != shape) {
    *tensor = Tensor(proto.dtype(), std::move(shape), *n);
  }
  if (expected > 0) {
    std::memcpy(tensor->raw_data(), proto.content().data(), expected);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> FromProto(const TensorProto& proto) {
  Tensor tensor;
  absl::Status status = FromProtoInto(proto, &tensor);
  if (!status.ok()) return status;
  return tensor;
}

}  // namespace pstrain
