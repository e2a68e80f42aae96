// The entry point of every fuzz target (tests/fuzz/*_fuzzer.cc, which define
// LLVMFuzzerTestOneInput), in either of two builds:
//
// - With libFuzzer (`bazel test --config=fuzz`, PSTRAIN_LIBFUZZER defined):
//   libFuzzer's main() runs. This file adds LLVMFuzzerInitialize, which under
//   `bazel test` points libFuzzer at a copy of each corpus directory in
//   $TEST_TMPDIR (libFuzzer adds the inputs it finds to its first corpus
//   directory, which must not be the source tree's) and writes crash
//   reproducers to $TEST_UNDECLARED_OUTPUTS_DIR (bazel-testlogs/.../
//   test.outputs/). Run by hand, the arguments are libFuzzer's as usual.
//
// - Otherwise (the default g++ build): a small standalone driver, so that the
//   targets run under every compiler. It takes libFuzzer's arguments:
//     <target> [-runs=N] [-seed=S] [-max_total_time=T] [-dict=F] DIR|FILE...
//   replays every file given (or found in a directory given), then runs N
//   (default 1000) random mutations of them: bit flips, byte changes,
//   insertions, deletions, copies, splices of two inputs and dictionary
//   tokens, deterministically from seed S (default 1), stopping early after
//   T seconds. Other flags are ignored. On a crash the input being run is
//   written to $TEST_UNDECLARED_OUTPUTS_DIR/crash-input (or ./crash-input)
//   for replay: `<target> crash-input`.
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#ifdef PSTRAIN_LIBFUZZER

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* test_tmpdir = std::getenv("TEST_TMPDIR");
  if (test_tmpdir == nullptr || *test_tmpdir == '\0') return 0;
  namespace fs = std::filesystem;
  // libFuzzer keeps pointers into the new argv: it lives for the process.
  static std::vector<std::string>* args = new std::vector<std::string>;
  static std::vector<char*>* pointers = new std::vector<char*>;
  args->push_back((*argv)[0]);
  bool has_artifact_prefix = false;
  for (int i = 1; i < *argc; ++i) {
    std::string arg = (*argv)[i];
    has_artifact_prefix |= arg.rfind("-artifact_prefix=", 0) == 0;
    std::error_code error;
    if (!arg.empty() && arg[0] != '-' && fs::is_directory(arg, error)) {
      const std::string copy =
          std::string(test_tmpdir) + "/corpus" + std::to_string(i);
      fs::create_directories(copy);
      // Files, not Bazel's runfiles links: libFuzzer may rewrite them.
      fs::copy(arg, copy,
               fs::copy_options::recursive |
                   fs::copy_options::overwrite_existing,
               error);
      if (error) {
        std::fprintf(stderr, "cannot copy corpus %s to %s: %s\n", arg.c_str(),
                     copy.c_str(), error.message().c_str());
        std::exit(1);
      }
      arg = copy;
    }
    args->push_back(arg);
  }
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (!has_artifact_prefix && outputs != nullptr && *outputs != '\0') {
    args->insert(args->begin() + 1,
                 std::string("-artifact_prefix=") + outputs + "/");
  }
  for (std::string& arg : *args) pointers->push_back(arg.data());
  pointers->push_back(nullptr);
  *argc = static_cast<int>(args->size());
  *argv = pointers->data();
  return 0;
}

#else  // The standalone driver.

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Input = std::vector<uint8_t>;

// The input being run, for the crash handler.
const uint8_t* g_current = nullptr;
size_t g_current_size = 0;
char g_crash_path[4096] = "crash-input";

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n <= 0) return;
    p += n;
    size -= n;
  }
}

// Saves the input being run, then lets the signal kill the process.
// Async-signal-safe: open, write and close only.
void OnCrash(int signal) {
  const int fd = open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    if (g_current_size > 0) WriteAll(fd, g_current, g_current_size);
    close(fd);
  }
  static const char kMessage[] = "\nfuzz driver: crashed; input saved to ";
  WriteAll(2, kMessage, sizeof(kMessage) - 1);
  WriteAll(2, g_crash_path, strlen(g_crash_path));
  WriteAll(2, "\n", 1);
  ::signal(signal, SIG_DFL);
  raise(signal);
}

void Run(const Input& input) {
  // An exactly-sized copy, so that a read past the end is past the buffer.
  const size_t size = input.size();
  uint8_t* copy = new uint8_t[size == 0 ? 1 : size];
  if (size > 0) std::memcpy(copy, input.data(), size);
  g_current = copy;
  g_current_size = size;
  LLVMFuzzerTestOneInput(copy, size);
  g_current = nullptr;
  g_current_size = 0;
  delete[] copy;
}

Input ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::fprintf(stderr, "fuzz driver: cannot read %s\n", path.c_str());
    std::exit(1);
  }
  return Input(std::istreambuf_iterator<char>(file),
               std::istreambuf_iterator<char>());
}

// A libFuzzer dictionary: lines `name="value"` or `"value"`, '#' comments,
// escapes \\, \" and \xNN.
std::vector<Input> ReadDictionary(const std::string& path) {
  std::vector<Input> tokens;
  std::ifstream file(path);
  if (!file) {
    std::fprintf(stderr, "fuzz driver: cannot read dictionary %s\n",
                 path.c_str());
    std::exit(1);
  }
  std::string line;
  while (std::getline(file, line)) {
    const size_t open = line.find('"');
    const size_t close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos ||
        close <= open) {
      continue;
    }
    Input token;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\' || i + 1 >= close) {
        token.push_back(line[i]);
      } else if (line[i + 1] == 'x' && i + 3 < close) {
        token.push_back(std::stoi(line.substr(i + 2, 2), nullptr, 16));
        i += 3;
      } else {
        token.push_back(line[++i]);
      }
    }
    if (!token.empty()) tokens.push_back(std::move(token));
  }
  return tokens;
}

class Mutator {
 public:
  Mutator(uint64_t seed, const std::vector<Input>* corpus,
          const std::vector<Input>* dictionary)
      : rng_(seed), corpus_(corpus), dictionary_(dictionary) {}

  Input Next() {
    Input input =
        corpus_->empty() ? Input() : (*corpus_)[Below(corpus_->size())];
    const int edits = 1 + Below(4);
    for (int i = 0; i < edits; ++i) Edit(&input);
    if (input.size() > kMaxSize) input.resize(kMaxSize);
    return input;
  }

 private:
  static constexpr size_t kMaxSize = 1 << 16;

  size_t Below(size_t n) { return n == 0 ? 0 : rng_() % n; }

  void Edit(Input* input) {
    static constexpr uint8_t kInteresting[] = {0,    1,    2,    0x7f, 0x80,
                                               0xff, 0xfe, '0',  '9',  '-',
                                               ',',  '"',  '{',  '[',  '\n'};
    Input& in = *input;
    switch (Below(9)) {
      case 0:  // Flip a bit.
        if (!in.empty()) in[Below(in.size())] ^= 1 << Below(8);
        break;
      case 1:  // Any byte.
        if (!in.empty()) in[Below(in.size())] = rng_();
        break;
      case 2:  // An interesting byte.
        if (!in.empty()) {
          in[Below(in.size())] = kInteresting[Below(sizeof(kInteresting))];
        }
        break;
      case 3:  // Insert random bytes.
        for (size_t n = 1 + Below(4), at = Below(in.size() + 1); n > 0; --n) {
          in.insert(in.begin() + at, static_cast<uint8_t>(rng_()));
        }
        break;
      case 4: {  // Erase a range.
        if (in.empty()) break;
        const size_t at = Below(in.size());
        const size_t n = 1 + Below(std::min<size_t>(in.size() - at, 16));
        in.erase(in.begin() + at, in.begin() + at + n);
        break;
      }
      case 5: {  // Copy a range elsewhere.
        if (in.empty()) break;
        const size_t from = Below(in.size());
        const size_t n = 1 + Below(std::min<size_t>(in.size() - from, 64));
        const Input piece(in.begin() + from, in.begin() + from + n);
        in.insert(in.begin() + Below(in.size() + 1), piece.begin(),
                  piece.end());
        break;
      }
      case 6: {  // Splice: a prefix of this, the rest of another input.
        if (corpus_->empty()) break;
        const Input& other = (*corpus_)[Below(corpus_->size())];
        const size_t keep = Below(in.size() + 1);
        const size_t from = Below(other.size() + 1);
        in.resize(keep);
        in.insert(in.end(), other.begin() + from, other.end());
        break;
      }
      case 7: {  // Insert or overwrite with a dictionary token.
        if (dictionary_->empty()) {
          if (!in.empty()) in.resize(Below(in.size()));  // Truncate instead.
          break;
        }
        const Input& token = (*dictionary_)[Below(dictionary_->size())];
        const size_t at = Below(in.size() + 1);
        if (Below(2) == 0 || at + token.size() > in.size()) {
          in.insert(in.begin() + at, token.begin(), token.end());
        } else {
          std::copy(token.begin(), token.end(), in.begin() + at);
        }
        break;
      }
      case 8: {  // Add a small number to a little-endian integer.
        if (in.size() < 4) break;
        const size_t width = size_t{1} << Below(3);  // 1, 2 or 4 bytes
        const size_t at = Below(in.size() - width + 1);
        uint32_t value = 0;
        std::memcpy(&value, &in[at], width);
        value += static_cast<uint32_t>(Below(33)) - 16;
        std::memcpy(&in[at], &value, width);
        break;
      }
    }
  }

  std::mt19937_64 rng_;
  const std::vector<Input>* corpus_;
  const std::vector<Input>* dictionary_;
};

}  // namespace

int main(int argc, char** argv) {
  long runs = 1000;
  uint64_t seed = 1;
  double max_seconds = 0;
  std::vector<Input> corpus, dictionary;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&arg](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return arg.compare(0, n, flag) == 0 ? arg.c_str() + n : nullptr;
    };
    if (const char* v = value("-runs=")) {
      runs = std::atol(v);
    } else if (const char* v = value("-seed=")) {
      seed = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("-max_total_time=")) {
      max_seconds = std::atof(v);
    } else if (const char* v = value("-dict=")) {
      dictionary = ReadDictionary(v);
    } else if (!arg.empty() && arg[0] == '-') {
      // Another libFuzzer flag: nothing to do here.
    } else if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) paths.push_back(entry.path().string());
      }
    } else {
      paths.push_back(arg);
    }
  }
  std::sort(paths.begin(), paths.end());
  for (const std::string& path : paths) corpus.push_back(ReadFile(path));

  if (const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR")) {
    std::snprintf(g_crash_path, sizeof(g_crash_path), "%s/crash-input",
                  outputs);
  }
  for (int s : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) signal(s, OnCrash);

  const auto start = std::chrono::steady_clock::now();
  for (const Input& input : corpus) Run(input);
  std::printf("fuzz driver: replayed %zu inputs\n", corpus.size());

  Mutator mutator(seed, &corpus, &dictionary);
  long done = 0;
  for (; done < runs; ++done) {
    if (max_seconds > 0 && done % 64 == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                      start)
                .count() > max_seconds) {
      break;
    }
    Run(mutator.Next());
  }
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
  std::printf("fuzz driver: ran %ld mutated inputs (seed %llu) in %.1f s\n",
              done, static_cast<unsigned long long>(seed), seconds);
  return 0;
}

#endif  // PSTRAIN_LIBFUZZER
