// A driver that runs the fuzz target over files given on the command line, so
// the saved corpus is replayed by every build, not only the clang one.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++n;
  }
  std::printf("replayed %d inputs without a crash\n", n);
  return n > 0 ? 0 : 1;
}
