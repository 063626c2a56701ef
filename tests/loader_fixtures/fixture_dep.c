/* fixture_dep.c: libfx_required_dep.so, a library only the manifest's `requires` field
 * makes reachable (it lives in fixtures/deps, on no search path; loader_test points
 * GPUKIT_CUDA_LIBRARY_PATH there). */
__attribute__((visibility("default"))) int gk_fixture_dep_value(void) { return 42; }
