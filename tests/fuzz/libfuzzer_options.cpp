// Linked into the libFuzzer builds of the fuzz targets. The root CMakeLists links clang's
// shared sanitizer runtime (the plugins need it), and -fsanitize=fuzzer puts libstdc++ ahead
// of it in the executable's library list; ASan would refuse to start for that order, which
// is harmless here (libstdc++ intercepts nothing ASan does).
extern "C" __attribute__((visibility("default"))) const char* __asan_default_options() {
  return "verify_asan_link_order=0";
}
