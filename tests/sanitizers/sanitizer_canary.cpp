// One planted bug per argument, for scripts/sanitize.sh to check that the sanitizer build reports it and fails:
// heap-overflow, use-after-free, leak (ASan/LSan), signed-overflow (UBSan), data-race (TSan). Not a CTest test: it
// must fail; sanitize.sh checks that it does, with the expected report.
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

namespace {

// Volatile pointers and argument-dependent sizes keep the compiler from proving the bug away at -O1 (it may
// otherwise forward a store to a load past the delete, or drop a new/delete pair).
int heap_overflow(int n) {
  int* volatile p = new int[static_cast<size_t>(n)];
  p[0] = 1;
  int v = p[n];  // one past the end
  delete[] p;
  return v;
}

int use_after_free(int n) {
  int* volatile p = new int[static_cast<size_t>(n)];
  p[0] = n;
  delete[] p;
  return p[0];
}

__attribute__((noinline)) int leak(int n) {
  int* volatile p = new int[static_cast<size_t>(n)];
  p[0] = n;
  p = nullptr;
  return n;
}

int signed_overflow(int n) {
  volatile int big = 2147483647;
  return big + n;
}

int data_race(int n) {
  static int shared = 0;
  std::thread t([n] { for (int i = 0; i < 1000; ++i) shared += n; });
  for (int i = 0; i < 1000; ++i) shared += n;
  t.join();
  return shared;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sanitizer_canary heap-overflow|use-after-free|leak|signed-overflow|data-race\n");
    return 2;
  }
  const std::string what = argv[1];
  const int n = argc;  // 2, unknown to the compiler
  int r = 0;
  if (what == "heap-overflow") r = heap_overflow(n);
  else if (what == "use-after-free") r = use_after_free(n);
  else if (what == "leak") r = leak(n);
  else if (what == "signed-overflow") r = signed_overflow(n);
  else if (what == "data-race") r = data_race(n);
  else {
    std::fprintf(stderr, "sanitizer_canary: unknown bug '%s'\n", what.c_str());
    return 2;
  }
  std::printf("sanitizer_canary: %s ran to the end (%d): not caught\n", what.c_str(), r);
  return 0;
}
