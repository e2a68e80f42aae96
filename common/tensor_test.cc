#include "common/tensor.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pstrain {
namespace {

const DataType kAllTypes[] = {DT_FLOAT, DT_HALF,  DT_BFLOAT16, DT_DOUBLE,
                              DT_INT32, DT_INT64, DT_UINT8};

// Fills every byte with a pattern that depends on its position.
void FillPattern(Tensor* t) {
  auto* bytes = static_cast<unsigned char*>(t->raw_data());
  for (size_t i = 0; i < t->num_bytes(); ++i) bytes[i] = (i * 37 + 11) & 0xff;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.num_bytes() == b.num_bytes() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.num_bytes()) == 0;
}

TEST(Tensor, DataTypeSizesAndNames) {
  EXPECT_EQ(DataTypeSize(DT_FLOAT), 4u);
  EXPECT_EQ(DataTypeSize(DT_HALF), 2u);
  EXPECT_EQ(DataTypeSize(DT_BFLOAT16), 2u);
  EXPECT_EQ(DataTypeSize(DT_DOUBLE), 8u);
  EXPECT_EQ(DataTypeSize(DT_INT32), 4u);
  EXPECT_EQ(DataTypeSize(DT_INT64), 8u);
  EXPECT_EQ(DataTypeSize(DT_UINT8), 1u);
  EXPECT_EQ(DataTypeSize(DT_INVALID), 0u);
  for (DataType dtype : kAllTypes) {
    absl::StatusOr<DataType> parsed = DataTypeFromName(DataTypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << DataTypeName(dtype);
    EXPECT_EQ(*parsed, dtype);
  }
  absl::StatusOr<DataType> bad = DataTypeFromName("float8");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'float8'"), std::string::npos);
}

TEST(Tensor, CreateIsZeroFilledAndAligned) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_FLOAT, {3, 5});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->num_elements(), 15);
  EXPECT_EQ(t->num_bytes(), 60u);
  EXPECT_EQ(t->row_elements(), 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw_data()) % Tensor::kAlignment,
            0u);
  for (float v : t->flat<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(Tensor, CreateRefusesBadInput) {
  EXPECT_EQ(Tensor::Create(DT_INVALID, {2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status negative = Tensor::Create(DT_FLOAT, {2, -1}).status();
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.message(), "shape [2, -1]: dimension 1 is negative");
  absl::Status huge =
      Tensor::Create(DT_FLOAT, {int64_t{1} << 31, int64_t{1} << 31}).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
}

TEST(Tensor, ScalarAndEmpty) {
  absl::StatusOr<Tensor> scalar = Tensor::Create(DT_DOUBLE, {});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->num_elements(), 1);
  absl::StatusOr<Tensor> empty = Tensor::Create(DT_FLOAT, {0, 4});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_bytes(), 0u);
  EXPECT_EQ(empty->raw_data(), nullptr);
  TensorProto proto;
  ToProto(*empty, &proto);
  absl::StatusOr<Tensor> back = FromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (std::vector<int64_t>{0, 4}));
}

TEST(Tensor, CloneIsDeep) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_INT32, {4});
  ASSERT_TRUE(t.ok());
  t->data<int32_t>()[2] = 9;
  Tensor copy = t->Clone();
  t->data<int32_t>()[2] = 1;
  EXPECT_EQ(copy.data<int32_t>()[2], 9);
  EXPECT_NE(copy.raw_data(), t->raw_data());
}

TEST(Tensor, ProtoRoundTripEveryDtype) {
  for (DataType dtype : kAllTypes) {
    absl::StatusOr<Tensor> t = Tensor::Create(dtype, {3, 2, 5});
    ASSERT_TRUE(t.ok());
    FillPattern(&*t);
    TensorProto proto;
    ToProto(*t, &proto);
    EXPECT_EQ(proto.dtype(), dtype);
    EXPECT_FALSE(proto.has_slice());
    EXPECT_EQ(proto.content().size(), t->num_bytes());
    // The proto survives serialization as well.
    TensorProto parsed;
    ASSERT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
    absl::StatusOr<Tensor> back = FromProto(parsed);
    ASSERT_TRUE(back.ok()) << DataTypeName(dtype) << ": " << back.status();
    EXPECT_EQ(back->dtype(), dtype);
    EXPECT_EQ(back->shape(), t->shape());
    EXPECT_TRUE(SameBytes(*t, *back)) << DataTypeName(dtype);
  }
}

TEST(Tensor, ContentIsLittleEndianRowMajor) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_INT32, {2, 2});
  ASSERT_TRUE(t.ok());
  for (int i = 0; i < 4; ++i) t->data<int32_t>()[i] = 0x01020300 + i;
  TensorProto proto;
  ToProto(*t, &proto);
  const std::string& c = proto.content();
  ASSERT_EQ(c.size(), 16u);
  EXPECT_EQ(static_cast<unsigned char>(c[4]), 0x01);  // low byte of element 1
  EXPECT_EQ(static_cast<unsigned char>(c[7]), 0x01);  // high byte
  EXPECT_EQ(static_cast<unsigned char>(c[6]), 0x02);
}

TEST(Tensor, RowSliceRoundTrip) {
  for (DataType dtype : kAllTypes) {
    absl::StatusOr<Tensor> t = Tensor::Create(dtype, {10, 3});
    ASSERT_TRUE(t.ok());
    FillPattern(&*t);
    TensorProto proto;
    RowsToProto(*t, 4, 7, &proto);
    EXPECT_EQ(proto.shape().dims(0), 10);
    EXPECT_EQ(proto.slice().begin(), 4);
    EXPECT_EQ(proto.slice().end(), 7);
    absl::StatusOr<Tensor> rows = FromProto(proto);
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_EQ(rows->shape(), (std::vector<int64_t>{3, 3}));
    const size_t row_bytes = 3 * DataTypeSize(dtype);
    EXPECT_EQ(std::memcmp(rows->raw_data(),
                          static_cast<const char*>(t->raw_data()) + 4 * row_bytes,
                          3 * row_bytes),
              0)
        << DataTypeName(dtype);
  }
}

TEST(Tensor, FromProtoIntoReusesAMatchingBuffer) {
  absl::StatusOr<Tensor> source = Tensor::Create(DT_FLOAT, {6, 2});
  ASSERT_TRUE(source.ok());
  FillPattern(&*source);
  TensorProto whole, rows;
  ToProto(*source, &whole);
  RowsToProto(*source, 2, 4, &rows);

  absl::StatusOr<Tensor> target = Tensor::Create(DT_FLOAT, {6, 2});
  ASSERT_TRUE(target.ok());
  const void* buffer = target->raw_data();
  ASSERT_TRUE(FromProtoInto(whole, &*target).ok());
  EXPECT_EQ(target->raw_data(), buffer);
  EXPECT_TRUE(SameBytes(*target, *source));

  // Another shape: reallocated to the carried rows.
  ASSERT_TRUE(FromProtoInto(rows, &*target).ok());
  EXPECT_EQ(target->shape(), (std::vector<int64_t>{2, 2}));

  // An error leaves the target as it was.
  TensorProto bad = whole;
  bad.mutable_content()->resize(3);
  EXPECT_FALSE(FromProtoInto(bad, &*target).ok());
  EXPECT_EQ(target->shape(), (std::vector<int64_t>{2, 2}));
}

TEST(Tensor, FromProtoRefusesMalformed) {
  absl::StatusOr<Tensor> t = Tensor::Create(DT_FLOAT, {4, 2});
  ASSERT_TRUE(t.ok());
  TensorProto good;
  ToProto(*t, &good);

  TensorProto bad_dtype = good;
  bad_dtype.set_dtype(DT_INVALID);
  EXPECT_EQ(FromProto(bad_dtype).status().message(), "tensor: invalid dtype 0");

  TensorProto short_content = good;
  short_content.mutable_content()->resize(31);
  EXPECT_EQ(FromProto(short_content).status().message(),
            "tensor: content holds 31 bytes at offset 0; a whole float32 "
            "[4, 2] needs 32 bytes at offset 0");

  TensorProto chunk = good;
  chunk.set_content_offset(8);
  EXPECT_EQ(FromProto(chunk).status().code(),
            absl::StatusCode::kInvalidArgument);

  TensorProto bad_slice = good;
  bad_slice.mutable_slice()->set_begin(3);
  bad_slice.mutable_slice()->set_end(5);
  EXPECT_EQ(FromProto(bad_slice).status().message(),
            "tensor: slice rows [3, 5) do not fit shape [4, 2]");

  TensorProto negative = good;
  negative.mutable_shape()->set_dims(1, -2);
  EXPECT_EQ(FromProto(negative).status().message(),
            "tensor: shape [4, -2]: dimension 1 is negative");

  TensorProto scalar_slice;
  scalar_slice.set_dtype(DT_FLOAT);
  scalar_slice.mutable_slice()->set_end(1);
  EXPECT_EQ(FromProto(scalar_slice).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain

namespace pstrain {
namespace {

TEST(Tensor, CreateReportsMemoryItCannotHave) {
  // 4 PiB: within the size limit, beyond any machine's memory.
  absl::StatusOr<Tensor> huge = Tensor::Create(DT_FLOAT, {int64_t{1} << 40, 1024});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.status().message(),
            "cannot allocate 4503599627370496 bytes for a tensor of shape "
            "[1099511627776, 1024]");
}

}  // namespace
}  // namespace pstrain
