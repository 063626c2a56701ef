// The driver of a fuzz target where libFuzzer is not available (a compiler other than clang):
// a bounded, seeded mutation runner over the same LLVMFuzzerTestOneInput. It runs every
// corpus file as it is, then `runs` mutations of each (bit flips, byte sets, edge bytes,
// inserts, erasures, copies within the input, splices with another corpus file).
//
//   fuzz_<target> [-runs=N] [-seed=S] [-max_total_time=SECONDS] [-max_len=BYTES] PATH...
//
// PATH is a corpus folder or a file. Options libFuzzer takes and this runner does not are
// ignored, so one command line serves both drivers. A crash is the sanitizer's report or the
// target's abort; the input that caused it is written to ./crash-standalone-<pid> (from the
// sanitizers' death callback or a signal handler), and the runner exits non-zero.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Present when a sanitizer runtime is linked in: called when it reports an error.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

// The input being run, for the crash writer.
const uint8_t* current_data = nullptr;
size_t current_size = 0;

// Writes the current input to ./crash-standalone-<pid>; async-signal-safe.
void write_current_input() {
  if (!current_data) return;
  char name[64] = "crash-standalone-";
  char digits[24];
  int n = 0;
  for (long pid = ::getpid(); pid > 0 && n < 23; pid /= 10) digits[n++] = char('0' + pid % 10);
  size_t len = std::strlen(name);
  while (n > 0) name[len++] = digits[--n];
  name[len] = 0;
  int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  for (size_t done = 0; done < current_size;) {
    ssize_t w = ::write(fd, current_data + done, current_size - done);
    if (w <= 0) break;
    done += size_t(w);
  }
  ::close(fd);
  static const char kNote[] = "fuzz runner: the crashing input is in ./crash-standalone-<pid>\n";
  ssize_t ignored = ::write(2, kNote, sizeof(kNote) - 1);
  (void)ignored;
  current_data = nullptr;
}

void on_fatal_signal(int sig) {
  write_current_input();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void install_crash_writer() {
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(&write_current_input);
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(sig, &on_fatal_signal);
}

void run(const std::vector<uint8_t>& input) {
  static const uint8_t kEmpty = 0;
  current_data = input.empty() ? &kEmpty : input.data();
  current_size = input.size();
  LLVMFuzzerTestOneInput(input.data(), input.size());
  current_data = nullptr;
}

struct Options {
  long runs = 1000;  // mutations per corpus file
  uint64_t seed = 1;
  double max_total_time = 0;  // seconds, 0 for no limit
  size_t max_len = 4096;
  bool verbose = false;
  std::vector<std::string> paths;
};

bool take(const char* arg, const char* name, std::string& value) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  value = arg + n + 1;
  return true;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (take(argv[i], "-runs", v)) {
      o.runs = std::stol(v);
    } else if (take(argv[i], "-seed", v)) {
      o.seed = std::stoull(v);
    } else if (take(argv[i], "-max_total_time", v)) {
      o.max_total_time = std::stod(v);
    } else if (take(argv[i], "-max_len", v)) {
      o.max_len = std::stoul(v);
    } else if (take(argv[i], "-verbose", v)) {
      o.verbose = v != "0";
    } else if (argv[i][0] == '-') {
      // A libFuzzer option this runner does not use.
    } else {
      o.paths.emplace_back(argv[i]);
    }
  }
  return o;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

struct Seed {
  std::string name;
  std::vector<uint8_t> bytes;
};

std::vector<Seed> load(const std::vector<std::string>& paths) {
  std::vector<Seed> seeds;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& f : files) seeds.push_back({f.string(), read_file(f)});
    } else if (fs::is_regular_file(p)) {
      seeds.push_back({p, read_file(p)});
    } else {
      std::fprintf(stderr, "fuzz runner: %s is neither a file nor a folder\n", p.c_str());
      std::exit(2);
    }
  }
  return seeds;
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  // One to four edits of `in`, kept within max_len.
  std::vector<uint8_t> mutate(const std::vector<uint8_t>& in, const std::vector<Seed>& others,
                              size_t max_len) {
    std::vector<uint8_t> out = in;
    int edits = 1 + int(pick(4));
    for (int e = 0; e < edits; ++e) edit(out, others);
    if (out.size() > max_len) out.resize(max_len);
    return out;
  }

 private:
  static constexpr uint8_t kEdgeBytes[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x3f, 0x40};

  size_t pick(size_t n) { return n ? size_t(rng_() % n) : 0; }

  void edit(std::vector<uint8_t>& b, const std::vector<Seed>& others) {
    switch (pick(7)) {
      case 0:
        if (!b.empty()) b[pick(b.size())] ^= uint8_t(1u << pick(8));
        break;
      case 1:
        if (!b.empty()) b[pick(b.size())] = uint8_t(rng_());
        break;
      case 2:
        if (!b.empty()) b[pick(b.size())] = kEdgeBytes[pick(std::size(kEdgeBytes))];
        break;
      case 3:
        b.insert(b.begin() + long(pick(b.size() + 1)), uint8_t(rng_()));
        break;
      case 4:
        if (!b.empty()) b.erase(b.begin() + long(pick(b.size())));
        break;
      case 5: {
        // Copy a run of the input over another place in it.
        if (b.size() < 2) break;
        size_t from = pick(b.size()), to = pick(b.size());
        size_t n = 1 + pick(std::min<size_t>(8, b.size() - std::max(from, to)));
        std::memmove(&b[to], &b[from], n);
        break;
      }
      default: {
        // Splice: this input's head with another corpus file's tail.
        const std::vector<uint8_t>& o = others[pick(others.size())].bytes;
        if (o.empty()) break;
        size_t cut = pick(b.size() + 1), from = pick(o.size());
        b.resize(cut);
        b.insert(b.end(), o.begin() + long(from), o.end());
        break;
      }
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  std::vector<Seed> seeds = load(o.paths);
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [-runs=N] [-seed=S] [-max_total_time=S] CORPUS...\n", argv[0]);
    return 2;
  }
  install_crash_writer();
  auto start = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    if (o.max_total_time <= 0) return false;
    std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    return spent.count() >= o.max_total_time;
  };
  for (const Seed& s : seeds) {
    std::fprintf(stderr, "fuzz runner: %s\n", s.name.c_str());
    run(s.bytes);
  }
  Mutator mutator(o.seed);
  uint64_t executed = seeds.size();
  for (long r = 0; r < o.runs && !out_of_time(); ++r) {
    for (const Seed& s : seeds) {
      std::vector<uint8_t> input = mutator.mutate(s.bytes, seeds, o.max_len);
      if (o.verbose) std::fprintf(stderr, "fuzz runner: mutation %ld of %s\n", r, s.name.c_str());
      run(input);
      ++executed;
    }
  }
  std::fprintf(stderr, "fuzz runner: %llu inputs (%zu corpus files, seed %llu), no crash\n",
               static_cast<unsigned long long>(executed), seeds.size(),
               static_cast<unsigned long long>(o.seed));
  return 0;
}
