// The wire contract is documented field by field: every message, field, enum,
// enum value, service and method in proto/ has a comment of its own.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "gtest/gtest.h"

namespace pstrain {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::EnumDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::FileDescriptorSet;
using google::protobuf::SourceLocation;

template <typename D>
void Check(const D* d, std::vector<std::string>* undocumented) {
  SourceLocation location;
  if (!d->GetSourceLocation(&location) ||
      location.leading_comments.find_first_not_of(" \n") == std::string::npos) {
    undocumented->push_back(d->full_name());
  }
}

void CheckEnum(const EnumDescriptor* e, std::vector<std::string>* out) {
  Check(e, out);
  for (int i = 0; i < e->value_count(); ++i) Check(e->value(i), out);
}

void CheckMessage(const Descriptor* m, std::vector<std::string>* out) {
  Check(m, out);
  for (int i = 0; i < m->field_count(); ++i) Check(m->field(i), out);
  for (int i = 0; i < m->nested_type_count(); ++i) {
    // Map entries are generated, not written.
    if (!m->nested_type(i)->options().map_entry()) {
      CheckMessage(m->nested_type(i), out);
    }
  }
  for (int i = 0; i < m->enum_type_count(); ++i) CheckEnum(m->enum_type(i), out);
}

TEST(ProtoDocs, EveryDeclarationHasAComment) {
  std::ifstream in("proto/descriptors.pb", std::ios::binary);
  ASSERT_TRUE(in) << "proto/descriptors.pb missing";
  std::stringstream bytes;
  bytes << in.rdbuf();
  FileDescriptorSet set;
  ASSERT_TRUE(set.ParseFromString(bytes.str()));

  DescriptorPool pool;
  int our_files = 0;
  std::vector<std::string> undocumented;
  for (const auto& file_proto : set.file()) {
    const FileDescriptor* file = pool.BuildFile(file_proto);
    ASSERT_NE(file, nullptr) << file_proto.name();
    if (file->name().rfind("proto/", 0) != 0) continue;
    ++our_files;
    for (int i = 0; i < file->message_type_count(); ++i) {
      CheckMessage(file->message_type(i), &undocumented);
    }
    for (int i = 0; i < file->enum_type_count(); ++i) {
      CheckEnum(file->enum_type(i), &undocumented);
    }
    for (int i = 0; i < file->service_count(); ++i) {
      Check(file->service(i), &undocumented);
      for (int j = 0; j < file->service(i)->method_count(); ++j) {
        Check(file->service(i)->method(j), &undocumented);
      }
    }
  }
  EXPECT_GE(our_files, 6);
  std::string list;
  for (const std::string& name : undocumented) list += "\n  " + name;
  EXPECT_TRUE(undocumented.empty()) << "without a comment:" << list;
}

}  // namespace
}  // namespace pstrain
