/*
 * sdk_model_check.c — run by tests/sdk/run_sdk_test.cmake with GPUKIT_PLUGIN_PATH set to
 * the out-of-tree example's build/manifests. Writes a tiny AcmeTinyLM model (config.json +
 * model.safetensors) into the folder given as argv[1], loads it through gk_model_load
 * (which must pick the example's model plugin acme_tiny_lm, by the architecture its
 * manifest lists), and checks a step's logits against head · embed[token] computed here,
 * greedy generation, and that a model missing a weight fails with the plugin's message.
 */
#include <gpukit/gpukit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define VOCAB 6
#define HIDDEN 3

#define REQUIRE_OK(call)                                                                \
  do {                                                                                  \
    gk_status s_ = (call);                                                              \
    if (s_ != GK_OK) {                                                                  \
      fprintf(stderr, "FAIL %s: %s: %s\n", #call, gk_status_name(s_), gk_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

static float embed[VOCAB][HIDDEN], head[VOCAB][HIDDEN];

/* A SafeTensors file of the f32 tensors embed.weight and (when with_head) head.weight. */
static int write_model(const char* folder, int with_head) {
  char path[1024], header[512];
  uint64_t header_len, pad;
  const uint64_t bytes = sizeof embed;
  FILE* f;
  snprintf(path, sizeof path, "%s/config.json", folder);
  f = fopen(path, "w");
  if (!f) return 0;
  fprintf(f, "{\"architectures\": [\"AcmeTinyLM\"], \"max_position_embeddings\": 16}\n");
  fclose(f);
  if (with_head) {
    snprintf(header, sizeof header,
             "{\"embed.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%llu]},"
             "\"head.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%llu,%llu]}}",
             VOCAB, HIDDEN, (unsigned long long)bytes, VOCAB, HIDDEN, (unsigned long long)bytes,
             (unsigned long long)(2 * bytes));
  } else {
    snprintf(header, sizeof header,
             "{\"embed.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[0,%llu]}}",
             VOCAB, HIDDEN, (unsigned long long)bytes);
  }
  /* The header is padded with spaces to a multiple of 8, as safetensors writes it. */
  header_len = strlen(header);
  for (pad = header_len; pad % 8; ++pad) strcat(header, " ");
  header_len = pad;
  snprintf(path, sizeof path, "%s/model.safetensors", folder);
  f = fopen(path, "wb");
  if (!f) return 0;
  fwrite(&header_len, 8, 1, f); /* little-endian u64 on the machines GPUkit runs on */
  fwrite(header, 1, (size_t)header_len, f);
  fwrite(embed, 1, sizeof embed, f);
  if (with_head) fwrite(head, 1, sizeof head, f);
  fclose(f);
  return 1;
}

int main(int argc, char** argv) {
  const int32_t prompt[3] = {4, 0, 5};
  float logits[3][VOCAB];
  int32_t generated[4], n = 0, i, j, t;
  gk_runtime* rt;
  gk_model* model = NULL;
  gk_model_info info;
  gk_session* session;
  gk_generate_options gen;
  char folder[1024];
  gk_status status;

  if (argc != 2) {
    fprintf(stderr, "usage: sdk_model_check WORK_FOLDER\n");
    return 2;
  }
  /* Distinct unit rows, and head row (t + 1) % VOCAB = 2 embed row t: the dot products
   * peak there, so each token's best next token is (token + 1) % VOCAB. */
  for (i = 0; i < VOCAB; ++i) {
    double norm = 0;
    for (j = 0; j < HIDDEN; ++j) norm += cos(1.1 * i + 0.7 * j) * cos(1.1 * i + 0.7 * j);
    for (j = 0; j < HIDDEN; ++j) {
      embed[i][j] = (float)(cos(1.1 * i + 0.7 * j) / sqrt(norm));
      head[(i + 1) % VOCAB][j] = 2.0f * embed[i][j];
    }
  }
  snprintf(folder, sizeof folder, "%s", argv[1]);
  if (!write_model(folder, 1)) {
    fprintf(stderr, "FAIL cannot write the model into %s\n", folder);
    return 1;
  }

  REQUIRE_OK(gk_runtime_create(NULL, &rt));
  REQUIRE_OK(gk_model_load(rt, folder, NULL, &model));
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  REQUIRE_OK(gk_model_get_info(model, &info));
  printf("model: %s, vocab %lld, context %lld\n", info.architecture ? info.architecture : "?",
         (long long)info.vocab_size, (long long)info.context_length);
  if (info.vocab_size != VOCAB || info.context_length != 16 || !info.architecture ||
      strcmp(info.architecture, "AcmeTinyLM") != 0) {
    fprintf(stderr, "FAIL the model info is not the tiny model's\n");
    return 1;
  }

  REQUIRE_OK(gk_session_create(model, NULL, &session));
  REQUIRE_OK(gk_session_step(session, prompt, 3, GK_STEP_ALL_LOGITS, &logits[0][0]));
  for (t = 0; t < 3; ++t) {
    for (i = 0; i < VOCAB; ++i) {
      double want = 0;
      for (j = 0; j < HIDDEN; ++j) want += (double)head[i][j] * embed[prompt[t]][j];
      if (fabs(logits[t][i] - want) > 1e-5) {
        fprintf(stderr, "FAIL logits[%d][%d] = %g, expected %g\n", (int)t, (int)i,
                logits[t][i], want);
        return 1;
      }
    }
  }
  gk_session_release(session);

  /* Greedy from token 0: 1, 2, 3, 4. */
  REQUIRE_OK(gk_session_create(model, NULL, &session));
  memset(&gen, 0, sizeof gen);
  gen.struct_size = sizeof gen;
  gen.max_tokens = 4;
  gen.top_p = 1;
  gen.repetition_penalty = 1;
  REQUIRE_OK(gk_session_generate(session, prompt + 1, 1, &gen, generated, 4, &n));
  for (i = 0; i < 4; ++i) {
    if (n != 4 || generated[i] != (i + 1) % VOCAB) {
      fprintf(stderr, "FAIL greedy token %d is %d, expected %d (%d tokens)\n", (int)i,
              (int)generated[i], (int)((i + 1) % VOCAB), (int)n);
      return 1;
    }
  }
  gk_session_release(session);
  gk_model_release(model);

  /* Without head.weight the plugin refuses the model, naming the tensor. */
  if (!write_model(folder, 0)) return 1;
  status = gk_model_load(rt, folder, NULL, &model);
  if (status != GK_NOT_FOUND || !strstr(gk_last_error(), "head.weight")) {
    fprintf(stderr, "FAIL a model without head.weight gave %s: %s\n", gk_status_name(status),
            gk_last_error());
    return 1;
  }
  printf("refused as expected: %s\n", gk_last_error());
  gk_runtime_destroy(rt);
  printf("acme_tiny_lm served AcmeTinyLM correctly\n");
  return 0;
}
