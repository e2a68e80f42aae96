#include "tests/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace testing {

std::string HttpGet(int port, const std::string& target, int* code) {
  *code = 0;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", target, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (body == std::string::npos || response.compare(0, 5, "HTTP/") != 0 ||
      response.size() < 12) {
    return "";
  }
  *code = std::atoi(response.substr(9, 3).c_str());
  return response.substr(body + 4);
}

}  // namespace testing
}  // namespace pstrain
