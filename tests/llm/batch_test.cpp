// Batching and memory accounting of the model C API (ABI 1.7) on the golden models of
// tests/llm/golden, cpu device: a batched decode step (one forward pass over several
// sessions of different lengths, sessions joining and leaving between steps) gives each
// session the logits and greedy tokens it gets alone; a gk_batch gives each sequence the
// tokens gk_session_generate gives it with the same options; a copied session goes on as
// its original; the model's KV pool grows on the task of the session that needs blocks, and
// a growth over the task's quota is refused while the rest work on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "llm_test.h"
#include "gpukit/gpukit.h"
#include "gpukit/gpukit_plugin.h"

// The ABI 1.7 session option and the plugin ABI 1.2 model entry sit after the 1.6 / 1.1
// layouts, which stay where they were.
static_assert(offsetof(gk_session_options, max_context) == 8);
static_assert(offsetof(gk_session_options, task) == 16);
static_assert(GK_SESSION_OPTIONS_SIZE == 16 && GK_SESSION_OPTIONS_SIZE_1_7 == 24);
static_assert(offsetof(gk_model_api, session_step) == 48);
static_assert(offsetof(gk_model_api, batch_step) == 56);
static_assert(GK_MODEL_API_SIZE == 56 && GK_MODEL_API_SIZE_1_2 == 64);
// Plugin ABI 1.4's session_copy follows 1.3's session_encode.
static_assert(offsetof(gk_model_api, session_copy) == 72 && GK_MODEL_API_SIZE_1_4 == 80);

namespace {

const char* kModels[] = {"llama", "llama3", "mistral", "qwen2", "qwen3", "smollm2", "gpt2"};


class LlmBatch : public ::testing::Test {
 public:
  void SetUp() override {
    gk_runtime_options o = GK_RUNTIME_OPTIONS_INIT;
    o.flags = GK_RUNTIME_IGNORE_ENVIRONMENT | GK_RUNTIME_NO_DEFAULT_PLUGINS;
    o.devices = "cpu";
    o.plugin_path = GPUKIT_TEST_MANIFESTS;
    ASSERT_EQ(gk_runtime_create(&o, &rt_), GK_OK) << gk_last_error();
  }
  void TearDown() override { gk_runtime_destroy(rt_); }

  gk_model* load(const std::string& name) {
    gk_model_options o{sizeof(o), 0, GK_DTYPE_F32};
    gk_model* m = nullptr;
    EXPECT_EQ(gk_model_load(rt_, golden_folder(name).c_str(), &o, &m), GK_OK) << gk_last_error();
    return m;
  }

  std::vector<int32_t> golden_prompt(const std::string& model, const std::string& name) {
    std::string file = golden_folder(model) + "/golden.safetensors";
    gk_weights* w = nullptr;
    EXPECT_EQ(gk_weights_open(rt_, file.c_str(), nullptr, &w), GK_OK) << gk_last_error();
    gk_tensor* t = nullptr;
    EXPECT_EQ(gk_weights_get(w, name.c_str(), 0, 0, nullptr, &t), GK_OK) << gk_last_error();
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    gk_tensor_get_desc(t, &d);
    const int32_t* p = static_cast<const int32_t*>(gk_tensor_data(t));
    std::vector<int32_t> out(p, p + d.shape[0]);
    gk_tensor_release(t);
    gk_weights_close(w);
    return out;
  }

  gk_task* task(const char* name, uint64_t memory_limit) {
    gk_task_spec spec{};
    spec.struct_size = sizeof(spec);
    spec.name = name;
    spec.device = 0;
    spec.qos = GK_QOS_BEST_EFFORT;
    spec.memory_limit = memory_limit;
    gk_task* t = nullptr;
    EXPECT_EQ(gk_task_create(rt_, &spec, &t), GK_OK) << gk_last_error();
    return t;
  }

  static uint64_t in_use(gk_task* t) {
    gk_task_info info{};
    info.struct_size = sizeof(info);
    EXPECT_EQ(gk_task_get_info(t, &info), GK_OK);
    return info.memory_in_use;
  }

  gk_runtime* rt_ = nullptr;
};


gk_generate_options greedy(int32_t max_tokens) {
  gk_generate_options o{};
  o.struct_size = sizeof(o);
  o.max_tokens = max_tokens;
  o.top_p = 1;
  o.repetition_penalty = 1;
  return o;
}

// Sequences of different lengths decode together; one joins after two steps and one
// leaves after four (continuous batching). Each step's row of a sequence must be its lone
// session's logits (f32: within 1e-5 of the largest logit) and give the same greedy token.
void check_batched_steps(LlmBatch* t, gk_runtime* rt, int32_t device, const char* label) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    gk_model_options mo{sizeof(mo), device, GK_DTYPE_F32};
    gk_model* m = nullptr;
    ASSERT_EQ(gk_model_load(rt, golden_folder(name).c_str(), &mo, &m), GK_OK) << gk_last_error();
    gk_model_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(gk_model_get_info(m, &info), GK_OK);
    const int64_t vocab = info.vocab_size;
    const std::vector<int32_t> a = t->golden_prompt(name, "prompt");
    const std::vector<int32_t> b = t->golden_prompt(name, "prompt_b");
    const std::vector<int32_t> c(a.begin(), a.begin() + 3);
    const std::vector<std::vector<int32_t>> prompts = {a, b, c};
    ASSERT_NE(a.size(), b.size());

    struct Sequence {
      gk_session* batched = nullptr;
      gk_session* alone = nullptr;
      int32_t next = 0;
      bool in_batch = false;
    };
    std::vector<Sequence> seqs(prompts.size());
    std::vector<float> row(static_cast<size_t>(vocab));
    auto start = [&](size_t i) {
      Sequence& s = seqs[i];
      s.batched = open_session(m, 64);
      s.alone = open_session(m, 64);
      const auto& p = prompts[i];
      ASSERT_EQ(gk_session_step(s.batched, p.data(), int32_t(p.size()), 0, row.data()), GK_OK)
          << gk_last_error();
      s.next = argmax(row.data(), vocab);
      ASSERT_EQ(gk_session_step(s.alone, p.data(), int32_t(p.size()), 0, nullptr), GK_OK);
      s.in_batch = true;
    };
    start(0);
    start(1);
    double worst = 0;
    for (int step = 0; step < 8; ++step) {
      if (step == 2) start(2);  // joins: prefilled alone, then batched
      if (step == 4) {          // leaves: its KV cache goes now
        gk_session_release(seqs[1].batched);
        seqs[1].batched = nullptr;
        seqs[1].in_batch = false;
      }
      std::vector<gk_session*> sessions;
      std::vector<int32_t> tokens;
      std::vector<size_t> which;
      for (size_t i = 0; i < seqs.size(); ++i) {
        if (!seqs[i].in_batch) continue;
        sessions.push_back(seqs[i].batched);
        tokens.push_back(seqs[i].next);
        which.push_back(i);
      }
      std::vector<float> logits(sessions.size() * size_t(vocab));
      ASSERT_EQ(gk_session_step_batch(sessions.data(), int32_t(sessions.size()), tokens.data(),
                                      logits.data()),
                GK_OK)
          << gk_last_error();
      for (size_t r = 0; r < which.size(); ++r) {
        Sequence& s = seqs[which[r]];
        ASSERT_EQ(gk_session_step(s.alone, &tokens[r], 1, 0, row.data()), GK_OK);
        const float* batched = logits.data() + r * size_t(vocab);
        worst = std::max(worst, row_error(batched, row.data(), vocab));
        EXPECT_EQ(argmax(batched, vocab), argmax(row.data(), vocab))
            << "sequence " << which[r] << ", step " << step;
        EXPECT_EQ(gk_session_length(s.batched), gk_session_length(s.alone));
        s.next = argmax(batched, vocab);
      }
    }
    EXPECT_LE(worst, 1e-5);
    std::printf("[ batched %s ] %-8s worst row error vs. alone %.2e\n", label, name, worst);
    for (Sequence& s : seqs) {
      gk_session_release(s.batched);
      gk_session_release(s.alone);
    }
    gk_model_release(m);
  }
}

TEST_F(LlmBatch, a_batched_step_gives_every_session_the_logits_it_gets_alone) {
  check_batched_steps(this, rt_, 0, "cpu");
}

// The same on a GPU, where a batch's matmuls are one [B, hidden] GEMM in a CUDA plugin.
TEST_F(LlmBatch, a_batched_step_on_a_cuda_device_gives_every_session_its_own_logits) {
  CudaRuntime c = cuda_runtime();
  ASSERT_NE(c.rt, nullptr) << c.skip;
  gk_runtime* rt = c.rt;
  const int32_t cuda = c.device;
  if (!c.skip.empty()) {
    gk_runtime_destroy(rt);
    GTEST_SKIP() << c.skip;
  }
  check_batched_steps(this, rt, cuda, "cuda");
  gk_runtime_destroy(rt);
}

// Each sequence of a batch has its own sampling options, seed, stop tokens and callback;
// sequences join between steps and one is removed before it ends. Each sequence's tokens
// are gk_session_generate's with the same prompt and options.
TEST_F(LlmBatch, a_generation_batch_gives_each_sequence_the_tokens_generate_gives) {
  gk_model* m = load("smollm2");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> a = golden_prompt("smollm2", "prompt");
  const std::vector<int32_t> b = golden_prompt("smollm2", "prompt_b");
  std::vector<gk_generate_options> options(4, greedy(12));
  options[1].temperature = 0.8;
  options[1].top_k = 40;
  options[1].top_p = 0.9;
  options[1].seed = 7;
  options[2].temperature = 1.1;
  options[2].min_p = 0.05;
  options[2].repetition_penalty = 1.3;
  options[2].seed = 99;
  options[3].max_tokens = 20;
  const std::vector<std::vector<int32_t>> prompts = {a, b, b, a};

  auto alone = [&](size_t i) {
    gk_session* s = open_session(m, 64);
    std::vector<int32_t> out(size_t(options[i].max_tokens));
    int32_t n = 0;
    EXPECT_EQ(gk_session_generate(s, prompts[i].data(), int32_t(prompts[i].size()), &options[i],
                                  out.data(), int32_t(out.size()), &n),
              GK_OK)
        << gk_last_error();
    out.resize(size_t(n));
    gk_session_release(s);
    return out;
  };
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < options.size(); ++i) expected.push_back(alone(i));
  // A stop token for sequence 0: its generation ends at the first one, as alone.
  int32_t stop = expected[0][5];
  options[0].stop_tokens = &stop;
  options[0].num_stop_tokens = 1;
  expected[0] = alone(0);
  ASSERT_LT(expected[0].size(), 12u);

  struct Streamed {
    std::vector<int32_t> tokens;
  };
  std::vector<Streamed> streamed(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    options[i].on_token = [](void* user, int32_t token) -> int32_t {
      static_cast<Streamed*>(user)->tokens.push_back(token);
      return 0;
    };
    options[i].user_data = &streamed[i];
  }

  gk_session_options so{};
  so.struct_size = sizeof(so);
  so.max_context = 64;
  gk_batch* batch = nullptr;
  ASSERT_EQ(gk_batch_create(m, &so, &batch), GK_OK) << gk_last_error();
  std::vector<int64_t> ids(options.size(), -1);
  auto add = [&](size_t i) {
    ASSERT_EQ(
        gk_batch_add(batch, prompts[i].data(), int32_t(prompts[i].size()), &options[i], &ids[i]),
        GK_OK)
        << gk_last_error();
  };
  add(0);
  add(1);
  int32_t active = 0;
  for (int step = 0; step < 30; ++step) {
    if (step == 3) add(2);
    if (step == 5) add(3);
    if (step == 8) ASSERT_EQ(gk_batch_remove(batch, ids[1]), GK_OK);
    ASSERT_EQ(gk_batch_step(batch, &active), GK_OK) << gk_last_error();
    if (step > 5 && active == 0) break;
  }
  EXPECT_EQ(active, 0);
  for (size_t i = 0; i < options.size(); ++i) {
    SCOPED_TRACE("sequence " + std::to_string(i));
    std::vector<int32_t> got(32);
    int32_t n = 0, finished = 0;
    if (i == 1) {
      EXPECT_EQ(gk_batch_tokens(batch, ids[i], got.data(), 32, &n, &finished), GK_NOT_FOUND);
      EXPECT_NE(std::string(gk_last_error()).find("sequence 1 is not in the batch"),
                std::string::npos)
          << gk_last_error();
      // What it made before it was removed begins what it makes alone.
      ASSERT_LE(streamed[i].tokens.size(), expected[i].size());
      EXPECT_TRUE(
          std::equal(streamed[i].tokens.begin(), streamed[i].tokens.end(), expected[i].begin()));
      EXPECT_GE(streamed[i].tokens.size(), 9u);
      continue;
    }
    ASSERT_EQ(gk_batch_tokens(batch, ids[i], got.data(), 32, &n, &finished), GK_OK);
    got.resize(size_t(n));
    EXPECT_EQ(finished, 1);
    EXPECT_EQ(got, expected[i]);
    EXPECT_EQ(streamed[i].tokens, expected[i]);
  }
  // Sampled sequences differ from the greedy one on the same prompt.
  EXPECT_NE(expected[1], expected[3]);
  gk_batch_release(batch);
  gk_model_release(m);
}

// The KV cache is one block pool per layer that the model's sessions share. A session takes
// its blocks when it is created; when the pool has too few free ones it grows, and the
// growth (the whole larger pool) is charged to the task of the session that needed it, as
// the steps' scratch is. A growth beyond the task's quota is RESOURCE_EXHAUSTED with the
// numbers, and the runtime, the model and the other sessions go on. Blocks a released
// session held go back to the pool for the next session.
TEST_F(LlmBatch, the_kv_pool_grows_on_the_task_that_needs_it_and_one_over_its_quota_is_refused) {
  gk_model* m = load("llama");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = golden_prompt("llama", "prompt");

  gk_task* roomy = task("roomy", 0);
  ASSERT_NE(roomy, nullptr);
  EXPECT_EQ(in_use(roomy), 0u);
  gk_session* charged = open_session(m, 256, roomy);
  ASSERT_NE(charged, nullptr);
  // llama: 2 layers x (keys + values) x 256 positions x 2 kv heads x 16 x 4 bytes.
  const uint64_t cache = 2 * 2 * 256 * 2 * 16 * 4;
  EXPECT_GE(in_use(roomy), cache);
  const uint64_t with_cache = in_use(roomy);
  std::vector<int32_t> out(8);
  int32_t n = 0;
  gk_generate_options o = greedy(8);
  ASSERT_EQ(
      gk_session_generate(charged, prompt.data(), int32_t(prompt.size()), &o, out.data(), 8, &n),
      GK_OK)
      << gk_last_error();
  gk_task_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_task_get_info(roomy, &info), GK_OK);
  EXPECT_GT(info.memory_peak, with_cache);  // the steps' scratch was charged too
  EXPECT_EQ(info.memory_in_use, with_cache);
  const std::vector<int32_t> charged_tokens(out.begin(), out.begin() + n);

  gk_task* tight = task("tight", cache / 2);
  ASSERT_NE(tight, nullptr);
  gk_session_options so{};
  so.struct_size = sizeof(so);
  so.max_context = 256;
  so.task = tight;
  gk_session* refused = nullptr;
  EXPECT_EQ(gk_session_create(m, &so, &refused), GK_RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused, nullptr);
  const std::string why = gk_last_error();
  EXPECT_NE(why.find("gk_session_create (KV cache of 256 positions)"), std::string::npos) << why;
  EXPECT_NE(why.find("quota of owner 'task:tight'"), std::string::npos) << why;
  EXPECT_EQ(in_use(tight), 0u);
  // The same through a batch: nothing is added.
  gk_batch* batch = nullptr;
  ASSERT_EQ(gk_batch_create(m, &so, &batch), GK_OK);
  int64_t id = -1;
  EXPECT_EQ(gk_batch_add(batch, prompt.data(), int32_t(prompt.size()), &o, &id),
            GK_RESOURCE_EXHAUSTED);
  int32_t active = -1;
  EXPECT_EQ(gk_batch_step(batch, &active), GK_OK);
  EXPECT_EQ(active, 0);
  gk_batch_release(batch);

  // A released session's blocks go back to the pool, which stays with the model: a small
  // session of the tight task takes them without a growth, so nothing is charged to it.
  gk_session_release(charged);
  EXPECT_EQ(in_use(roomy), with_cache);
  so.max_context = 16;
  gk_session* small = nullptr;
  ASSERT_EQ(gk_session_create(m, &so, &small), GK_OK) << gk_last_error();
  EXPECT_EQ(in_use(tight), 0u);
  // Everything else works on: a session of no task gives the tokens of the first. It grows
  // the pool, and a growth allocates the whole larger pool on the task that needs it and
  // frees the old one: roomy pays no more.
  gk_session* free_session = open_session(m);
  EXPECT_EQ(in_use(roomy), 0u);
  ASSERT_EQ(gk_session_generate(free_session, prompt.data(), int32_t(prompt.size()), &o, out.data(),
                                8, &n),
            GK_OK)
      << gk_last_error();
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + n), charged_tokens);
  gk_session_release(free_session);
  gk_session_release(small);
  EXPECT_EQ(in_use(tight), 0u);
  gk_task_destroy(tight);
  gk_task_destroy(roomy);
  gk_model_release(m);
}

// Sessions created while another holds keys grow the pool (its blocks move to a larger
// allocation); the session holding keys goes on to the tokens it gives alone, and so does a
// session whose blocks are scattered over the pool.
TEST_F(LlmBatch, a_session_goes_on_unchanged_while_new_sessions_grow_the_kv_pool) {
  for (const char* name : {"llama", "gpt2"}) {
    SCOPED_TRACE(name);
    gk_model* m = load(name);
    ASSERT_NE(m, nullptr);
    gk_model_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(gk_model_get_info(m, &info), GK_OK);
    const std::vector<int32_t> prompt = golden_prompt(name, "prompt");
    gk_generate_options o = greedy(10);
    std::vector<int32_t> expected(10);
    int32_t n = 0;
    gk_session* alone = open_session(m, 64);
    ASSERT_EQ(gk_session_generate(alone, prompt.data(), int32_t(prompt.size()), &o, expected.data(),
                                  10, &n),
              GK_OK);
    expected.resize(size_t(n));
    gk_session_release(alone);

    gk_session* s = open_session(m, 64);
    std::vector<float> row(static_cast<size_t>(info.vocab_size));
    ASSERT_EQ(gk_session_step(s, prompt.data(), int32_t(prompt.size()), 0, row.data()), GK_OK);
    std::vector<int32_t> got = {argmax(row.data(), info.vocab_size)};
    std::vector<gk_session*> others;
    while (got.size() < expected.size()) {
      others.push_back(open_session(m, 16));  // no block is free: the pool grows
      ASSERT_EQ(gk_session_step(s, &got.back(), 1, 0, row.data()), GK_OK) << gk_last_error();
      got.push_back(argmax(row.data(), info.vocab_size));
    }
    EXPECT_EQ(got, expected);
    // Released sessions' blocks are taken again in another order: a session over blocks
    // that do not follow each other gives the same tokens.
    for (size_t i = 0; i < others.size(); i += 2) gk_session_release(others[i]);
    gk_session* scattered = open_session(m, 32);  // 11 + 10 positions: two blocks, not neighbours
    std::vector<int32_t> again(10);
    ASSERT_EQ(gk_session_generate(scattered, prompt.data(), int32_t(prompt.size()), &o,
                                  again.data(), 10, &n),
              GK_OK)
        << gk_last_error();
    again.resize(size_t(n));
    EXPECT_EQ(again, expected);
    gk_session_release(scattered);
    for (size_t i = 1; i < others.size(); i += 2) gk_session_release(others[i]);
    gk_session_release(s);
    gk_model_release(m);
  }
}

// ABI 1.12: a copy of a session goes on as the original does (beam search forks this way):
// the same logits for the same next tokens, in a batched step too, while the original moves
// on its own; a copy to a session too small, or of another model, is refused.
TEST_F(LlmBatch, a_copied_session_goes_on_as_the_original) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    gk_model* m = load(name);
    ASSERT_NE(m, nullptr);
    gk_model_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(gk_model_get_info(m, &info), GK_OK);
    const int64_t vocab = info.vocab_size;
    const std::vector<int32_t> prompt = golden_prompt(name, "prompt");
    gk_session* original = open_session(m, 64);
    gk_session* copy = open_session(m, 64);
    ASSERT_EQ(gk_session_step(copy, prompt.data(), 2, 0, nullptr), GK_OK);  // overwritten
    ASSERT_EQ(gk_session_step(original, prompt.data(), int32_t(prompt.size()), 0, nullptr),
              GK_OK);
    ASSERT_EQ(gk_session_copy(copy, original), GK_OK) << gk_last_error();
    EXPECT_EQ(gk_session_length(copy), int64_t(prompt.size()));
    EXPECT_EQ(gk_session_copy(copy, copy), GK_OK);  // a no-op

    // Both step the same token, in one batch: the same row twice.
    gk_session* both[2] = {original, copy};
    const int32_t same[2] = {prompt[0], prompt[0]};
    std::vector<float> rows(2 * size_t(vocab));
    ASSERT_EQ(gk_session_step_batch(both, 2, same, rows.data()), GK_OK) << gk_last_error();
    EXPECT_LE(row_error(rows.data() + vocab, rows.data(), vocab), 1e-6);
    // The original moves on alone; the copy, stepped with the same token later, agrees.
    std::vector<float> a(static_cast<size_t>(vocab)), b(static_cast<size_t>(vocab));
    ASSERT_EQ(gk_session_step(original, &prompt[1], 1, 0, a.data()), GK_OK);
    ASSERT_EQ(gk_session_step(original, &prompt[2], 1, 0, nullptr), GK_OK);
    ASSERT_EQ(gk_session_step(copy, &prompt[1], 1, 0, b.data()), GK_OK);
    EXPECT_LE(row_error(b.data(), a.data(), vocab), 1e-6);
    EXPECT_EQ(gk_session_length(original), gk_session_length(copy) + 1);

    gk_session* small = open_session(m, 2);
    EXPECT_EQ(gk_session_copy(small, original), GK_OUT_OF_RANGE);
    EXPECT_NE(std::string(gk_last_error()).find("positions"), std::string::npos)
        << gk_last_error();
    EXPECT_EQ(gk_session_length(small), 0);
    gk_model* other = load(name);
    gk_session* foreign = open_session(other, 64);
    EXPECT_EQ(gk_session_copy(foreign, original), GK_INVALID_ARGUMENT);
    EXPECT_NE(std::string(gk_last_error()).find("different models"), std::string::npos);
    EXPECT_EQ(gk_session_copy(nullptr, original), GK_INVALID_ARGUMENT);
    for (gk_session* s : {original, copy, small, foreign}) gk_session_release(s);
    gk_model_release(other);
    gk_model_release(m);
  }
}

TEST_F(LlmBatch, a_finished_task_takes_no_session) {
  gk_model* m = load("llama");
  ASSERT_NE(m, nullptr);
  gk_task* t = task("done", 0);
  ASSERT_EQ(gk_task_cancel(t), GK_OK);
  gk_session_options so{};
  so.struct_size = sizeof(so);
  so.task = t;
  gk_session* s = nullptr;
  EXPECT_EQ(gk_session_create(m, &so, &s), GK_FAILED_PRECONDITION);
  EXPECT_NE(std::string(gk_last_error()).find("task 'done' is Cancelled"), std::string::npos)
      << gk_last_error();
  gk_task_destroy(t);
  gk_model_release(m);
}

uint64_t ops_launched(gk_task* t) {
  gk_task_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(gk_task_get_info(t, &info), GK_OK) << gk_last_error();
  return info.ops_launched;
}

// A session of a task runs its work on a stream of the task, so the task counts its ops:
// the model plugin's (its step's ops, called through the host on the stream it is given)
// and the sample op. A session of no task, or a batch led by one, launches nothing of the
// task's, and gives the same tokens. Once the task has finished, its session's steps are
// refused with the task's state.
TEST_F(LlmBatch, a_sessions_steps_and_draws_are_launched_on_its_tasks_stream) {
  gk_model* m = load("llama");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = golden_prompt("llama", "prompt");
  gk_task* t = task("decode", 0);
  ASSERT_NE(t, nullptr);
  gk_session* charged = open_session(m, 64, t);
  gk_session* free_session = open_session(m, 64);
  ASSERT_TRUE(charged && free_session);
  EXPECT_EQ(ops_launched(t), 0u);  // making the KV cache launches nothing

  // A step alone (no sampling): the plugin's ops are the task's.
  std::vector<float> logits(320);
  ASSERT_EQ(gk_session_step(charged, prompt.data(), int32_t(prompt.size()), 0, logits.data()),
            GK_OK)
      << gk_last_error();
  const uint64_t per_step = ops_launched(t);
  EXPECT_GT(per_step, 2u);  // llama: 2 layers of several ops each
  gk_task_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(gk_task_get_info(t, &info), GK_OK);
  EXPECT_EQ(info.state, GK_TASK_RUNNING);  // the first op moved it from Admitted
  std::vector<float> free_logits(320);
  ASSERT_EQ(gk_session_step(free_session, prompt.data(), int32_t(prompt.size()), 0,
                            free_logits.data()),
            GK_OK)
      << gk_last_error();
  EXPECT_EQ(ops_launched(t), per_step);
  EXPECT_EQ(logits, free_logits);

  // Generation: each token is a step and a draw, all of them the task's.
  const int32_t first = argmax(logits.data(), 320);
  gk_generate_options o = greedy(4);
  std::vector<int32_t> out(4), free_out(4);
  int32_t n = 0, free_n = 0;
  uint64_t before = ops_launched(t);
  ASSERT_EQ(gk_session_generate(charged, &first, 1, &o, out.data(), 4, &n), GK_OK)
      << gk_last_error();
  ASSERT_EQ(n, 4);
  EXPECT_GE(ops_launched(t) - before, 4 * per_step / 2 + 4);
  before = ops_launched(t);
  ASSERT_EQ(gk_session_generate(free_session, &first, 1, &o, free_out.data(), 4, &free_n), GK_OK)
      << gk_last_error();
  EXPECT_EQ(ops_launched(t), before);
  EXPECT_EQ(out, free_out);

  // A batched step runs on sessions[0]'s stream: the task's when its session leads.
  const int32_t next[2] = {out[3], out[3]};
  gk_session* led_by_task[2] = {charged, free_session};
  gk_session* led_by_free[2] = {free_session, charged};
  before = ops_launched(t);
  ASSERT_EQ(gk_session_step_batch(led_by_free, 2, next, nullptr), GK_OK) << gk_last_error();
  EXPECT_EQ(ops_launched(t), before);
  ASSERT_EQ(gk_session_step_batch(led_by_task, 2, next, nullptr), GK_OK) << gk_last_error();
  EXPECT_GT(ops_launched(t), before);

  // A finished task launches nothing: its session's steps are refused, naming the state.
  ASSERT_EQ(gk_task_complete(t), GK_OK) << gk_last_error();
  const int64_t length = gk_session_length(charged);
  EXPECT_EQ(gk_session_step(charged, &first, 1, 0, nullptr), GK_FAILED_PRECONDITION);
  EXPECT_NE(std::string(gk_last_error()).find("task 'decode' is Completed"), std::string::npos)
      << gk_last_error();
  EXPECT_EQ(gk_session_length(charged), length);
  ASSERT_EQ(gk_session_step(free_session, &first, 1, 0, nullptr), GK_OK) << gk_last_error();
  gk_session_release(charged);
  gk_session_release(free_session);
  gk_task_destroy(t);
  gk_model_release(m);
}

// A gk_batch of a task: its sequences' prefills, steps and draws are the task's, and its
// tokens are those of a batch of no task.
TEST_F(LlmBatch, a_batch_of_a_task_launches_on_the_tasks_stream) {
  gk_model* m = load("llama");
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = golden_prompt("llama", "prompt");
  gk_task* t = task("batch", 0);
  ASSERT_NE(t, nullptr);
  std::vector<std::vector<int32_t>> tokens;
  for (gk_task* owner : {t, static_cast<gk_task*>(nullptr)}) {
    gk_session_options so{};
    so.struct_size = sizeof(so);
    so.max_context = 64;
    so.task = owner;
    gk_batch* batch = nullptr;
    ASSERT_EQ(gk_batch_create(m, &so, &batch), GK_OK) << gk_last_error();
    const uint64_t before = ops_launched(t);
    gk_generate_options o = greedy(6);
    int64_t ids[2] = {-1, -1};
    ASSERT_EQ(gk_batch_add(batch, prompt.data(), int32_t(prompt.size()), &o, &ids[0]), GK_OK)
        << gk_last_error();
    o.temperature = 0.7;  // the second draws row by row
    o.seed = 3;
    ASSERT_EQ(gk_batch_add(batch, prompt.data(), 3, &o, &ids[1]), GK_OK) << gk_last_error();
    int32_t active = 0;
    do {
      ASSERT_EQ(gk_batch_step(batch, &active), GK_OK) << gk_last_error();
    } while (active > 0);
    if (owner) {
      EXPECT_GT(ops_launched(t), before);
    } else {
      EXPECT_EQ(ops_launched(t), before);
    }
    std::vector<int32_t> all;
    for (int64_t id : ids) {
      std::vector<int32_t> out(6);
      int32_t count = 0;
      ASSERT_EQ(gk_batch_tokens(batch, id, out.data(), 6, &count, nullptr), GK_OK);
      all.insert(all.end(), out.begin(), out.begin() + count);
    }
    tokens.push_back(all);
    gk_batch_release(batch);
  }
  EXPECT_EQ(tokens[0], tokens[1]);
  gk_task_destroy(t);
  gk_model_release(m);
}

TEST_F(LlmBatch, bad_batches_are_refused_and_change_no_session) {
  gk_model* m = load("llama");
  gk_model* other = load("qwen2");
  ASSERT_TRUE(m && other);
  const std::vector<int32_t> prompt = golden_prompt("llama", "prompt");
  gk_session* a = open_session(m, 16);
  gk_session* b = open_session(m, 16);
  gk_session* c = open_session(other, 16);
  ASSERT_EQ(gk_session_step(a, prompt.data(), int32_t(prompt.size()), 0, nullptr), GK_OK);
  const int64_t a_length = gk_session_length(a);
  int32_t tokens[2] = {1, 2};
  auto refused = [&](gk_session* s0, gk_session* s1, int32_t count, gk_status status,
                     const char* message) {
    gk_session* ss[2] = {s0, s1};
    EXPECT_EQ(gk_session_step_batch(ss, count, tokens, nullptr), status) << message;
    EXPECT_NE(std::string(gk_last_error()).find(message), std::string::npos) << gk_last_error();
    EXPECT_EQ(gk_session_length(a), a_length);
    EXPECT_EQ(gk_session_length(b), 0);
  };
  refused(a, a, 2, GK_INVALID_ARGUMENT, "sessions[1] is sessions[0] again");
  refused(a, c, 2, GK_INVALID_ARGUMENT, "sessions[1] is a session of another model");
  refused(a, nullptr, 2, GK_INVALID_ARGUMENT, "sessions[1] is NULL");
  refused(a, b, 0, GK_INVALID_ARGUMENT, "count 0 is not >= 1");
  tokens[1] = 320;
  refused(a, b, 2, GK_INVALID_ARGUMENT, "token id 320 at index 1 is out of range [0, 320)");
  tokens[1] = 2;
  // Fill a to its 16 positions: the batch names it.
  std::vector<int32_t> fill(size_t(16 - a_length), 5);
  ASSERT_EQ(gk_session_step(a, fill.data(), int32_t(fill.size()), 0, nullptr), GK_OK);
  gk_session* ss[2] = {b, a};
  EXPECT_EQ(gk_session_step_batch(ss, 2, tokens, nullptr), GK_OUT_OF_RANGE);
  EXPECT_NE(std::string(gk_last_error()).find("sessions[1] is full: it holds 16 of its 16"),
            std::string::npos)
      << gk_last_error();
  EXPECT_EQ(gk_session_length(b), 0);

  gk_batch* batch = nullptr;
  ASSERT_EQ(gk_batch_create(m, nullptr, &batch), GK_OK);
  EXPECT_EQ(gk_batch_remove(batch, 3), GK_NOT_FOUND);
  int32_t n = 0;
  EXPECT_EQ(gk_batch_tokens(batch, 0, nullptr, 0, &n, nullptr), GK_NOT_FOUND);
  gk_generate_options o = greedy(4);
  o.top_p = 0;
  int64_t id = -1;
  EXPECT_EQ(gk_batch_add(batch, prompt.data(), int32_t(prompt.size()), &o, &id),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(gk_last_error()).find("gk_batch_add: top_p 0"), std::string::npos)
      << gk_last_error();
  o.top_p = 1;
  int32_t bad = -1;
  EXPECT_EQ(gk_batch_add(batch, &bad, 1, &o, &id), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_batch_add(batch, prompt.data(), int32_t(prompt.size()), &o, &id), GK_OK);
  EXPECT_EQ(id, 0);  // the failed adds took no id
  gk_batch_release(batch);
  gk_session_release(a);
  gk_session_release(b);
  gk_session_release(c);
  gk_model_release(other);
  gk_model_release(m);
}

}  // namespace
