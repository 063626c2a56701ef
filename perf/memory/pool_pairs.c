/* gk_buffer_alloc + gk_buffer_free pairs on a created stream of the cpu device, for
 * instruction and cache-line counts under callgrind.
 *
 *   pool_pairs warm SIZE N: 200 pairs, then N more, all in pair_loop. Instructions per pair:
 *     run with N = 1000 and N = 2000 under
 *     valgrind --tool=callgrind --toggle-collect=pair_loop
 *     and divide the difference of the totals by 1000 (pair_loop's own loop is 17 of them).
 *   pool_pairs cold SIZE N: N pairs in pair_once, each after 16 MiB are written (the caches
 *     hold nothing of the pair): with --toggle-collect=pair_once --cache-sim=yes, the D1
 *     misses per pair are the data cache lines a cold pair touches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpukit/gpukit.h"

__attribute__((noinline)) void pair_loop(gk_runtime* rt, const gk_alloc_args* a, gk_stream* s,
                                         int n) {
  for (int i = 0; i < n; ++i) {
    gk_buffer* b = NULL;
    if (gk_buffer_alloc(rt, a, &b) != GK_OK || gk_buffer_free(b, s) != GK_OK) exit(1);
  }
}

__attribute__((noinline)) void pair_once(gk_runtime* rt, const gk_alloc_args* a, gk_stream* s) {
  gk_buffer* b = NULL;
  if (gk_buffer_alloc(rt, a, &b) != GK_OK || gk_buffer_free(b, s) != GK_OK) exit(1);
}

int main(int argc, char** argv) {
  if (argc != 4 || (strcmp(argv[1], "warm") != 0 && strcmp(argv[1], "cold") != 0)) {
    fprintf(stderr, "usage: %s warm|cold SIZE N\n", argv[0]);
    return 2;
  }
  int cold = strcmp(argv[1], "cold") == 0;
  unsigned long long size = strtoull(argv[2], NULL, 10);
  int n = atoi(argv[3]);
  gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
  o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
  o.devices = "cpu";
  o.log_level = GK_LOG_WARNING;
  gk_runtime* rt = NULL;
  gk_stream* s = NULL;
  if (gk_runtime_create(&o, &rt) != GK_OK || gk_stream_create(rt, 0, 0, &s) != GK_OK) {
    fprintf(stderr, "%s\n", gk_last_error());
    return 1;
  }
  gk_alloc_args a;
  memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.device = 0;
  a.size = size;
  a.stream = s;
  /* A function pointer the compiler cannot see through: pair_loop stays one call. */
  void (*volatile loop)(gk_runtime*, const gk_alloc_args*, gk_stream*, int) = pair_loop;
  loop(rt, &a, s, 200);
  if (!cold) {
    loop(rt, &a, s, n);
  } else {
    size_t sweep_bytes = (size_t)16 << 20;
    volatile char* sweep = malloc(sweep_bytes);
    if (!sweep) return 1;
    for (int i = 0; i < n; ++i) {
      for (size_t k = 0; k < sweep_bytes; k += 64) sweep[k] = (char)i;
      pair_once(rt, &a, s);
    }
    free((void*)sweep);
  }
  gk_stream_destroy(s);
  gk_runtime_destroy(rt);
  return 0;
}
