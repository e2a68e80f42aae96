#include "common/json_util.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

using Json = nlohmann::json;

// Receives the parser's events only to learn where and why it failed.
class ParseErrorSax : public nlohmann::json_sax<Json> {
 public:
  const std::string& message() const { return message_; }

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    // what() is "[json.exception.parse_error.101] parse error at line 1,
    // column 9: ..."; the bracketed id means nothing to users.
    message_ = ex.what();
    const size_t end_of_id = message_.find("] ");
    if (end_of_id != std::string::npos) message_.erase(0, end_of_id + 2);
    return false;
  }

 private:
  std::string message_ = "parse error";
};

// Why `text`, which failed to parse, is not JSON: the DOM parser without
// exceptions reports failure but not where, so the SAX parser reads it again
// to find out.
std::string JsonParseError(absl::string_view text) {
  ParseErrorSax sax;
  Json::sax_parse(text.begin(), text.end(), &sax);
  return sax.message();
}

template <typename J>
absl::StatusOr<J> ParseJsonAs(absl::string_view text) {
  // The parser itself keeps its own stack, so it reads any depth; the
  // callback only notes whether the text went too deep.
  int deepest = 0;
  const typename J::parser_callback_t note_depth =
      [&deepest](int depth, nlohmann::detail::parse_event_t event, J&) {
        // `depth` counts the containers around the one starting.
        if (event == nlohmann::detail::parse_event_t::object_start ||
            event == nlohmann::detail::parse_event_t::array_start) {
          deepest = std::max(deepest, depth + 1);
        }
        return true;
      };
  J value = J::parse(text.begin(), text.end(), note_depth,
                     /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return absl::InvalidArgumentError(JsonParseError(text));
  }
  if (deepest > kMaxJsonDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested more than ", kMaxJsonDepth, " levels deep"));
  }
  return value;
}

}  // namespace

absl::StatusOr<Json> ParseJson(absl::string_view text) {
  return ParseJsonAs<Json>(text);
}

absl::StatusOr<nlohmann::ordered_json> ParseOrderedJson(
    absl::string_view text) {
  return ParseJsonAs<nlohmann::ordered_json>(text);
}

std::string JsonGot(const Json& value) {
  if (value.is_null()) return "got null";
  return absl::StrCat("got ",
                      value.is_array() || value.is_object() ? "an " : "a ",
                      value.type_name());
}

}  // namespace pstrain
