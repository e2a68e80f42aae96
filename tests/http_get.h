// A plain HTTP/1.0 GET to 127.0.0.1, for tests and benchmarks that read a
// process's /metrics or Prometheus's API.
#ifndef PSTRAIN_TESTS_HTTP_GET_H_
#define PSTRAIN_TESTS_HTTP_GET_H_

#include <string>

namespace pstrain {
namespace testing {

// The body of GET http://127.0.0.1:<port><target>; *code is the HTTP status,
// or 0 (and "" returned) when nothing answers.
std::string HttpGet(int port, const std::string& target, int* code);

}  // namespace testing
}  // namespace pstrain

#endif  // PSTRAIN_TESTS_HTTP_GET_H_
