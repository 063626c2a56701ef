// Decode steps replayed from CUDA graphs (plugins/llm DecodeGraphs, the host's graph services)
// against the same steps run op by op (GPUKIT_DECODE_GRAPHS=0, read when a model loads), on
// the golden models: per step, the logits within f32 rounding and the same greedy token,
// for one session through three table widths (64, 128, 256 positions) and for a batch that changes
// size. The runtime's debug log proves that graphs were captured and none failed, so a
// silent fall back to op-by-op steps cannot pass. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "llm_test.h"
#include "gpukit/gpukit.h"

namespace {


struct LogCount {
  std::mutex mu;
  int captured = 0;
  std::vector<std::string> failures;
};

void count_log(void* user, int32_t, const char* message) {
  auto* c = static_cast<LogCount*>(user);
  const std::string line = message ? message : "";
  std::lock_guard<std::mutex> lock(c->mu);
  if (line.find("captured as a CUDA graph") != std::string::npos) ++c->captured;
  if (line.find("host.graph_") != std::string::npos) c->failures.push_back(line);
}

class DecodeGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime_ = cuda_runtime(count_log, &log_, GK_LOG_DEBUG);
    ASSERT_NE(runtime_.rt, nullptr) << runtime_.skip;
    if (!runtime_.skip.empty()) GTEST_SKIP() << runtime_.skip;
  }
  void TearDown() override {
    if (runtime_.rt) gk_runtime_destroy(runtime_.rt);
  }

  // The model loaded with decode graphs on or off.
  gk_model* load(const char* name, bool graphs) {
    if (graphs) {
      unsetenv("GPUKIT_DECODE_GRAPHS");
    } else {
      setenv("GPUKIT_DECODE_GRAPHS", "0", 1);
    }
    gk_model_options o{sizeof(o), runtime_.device, GK_DTYPE_F32};
    gk_model* m = nullptr;
    EXPECT_EQ(gk_model_load(runtime_.rt, golden_folder(name).c_str(), &o, &m), GK_OK) << gk_last_error();
    unsetenv("GPUKIT_DECODE_GRAPHS");
    return m;
  }

  CudaRuntime runtime_;
  LogCount log_;
};


int64_t vocab_of(gk_model* m) {
  gk_model_info info{};
  info.struct_size = sizeof(info);
  EXPECT_EQ(gk_model_get_info(m, &info), GK_OK);
  return info.vocab_size;
}

const char* kModels[] = {"llama3", "qwen3", "gpt2"};

TEST_F(DecodeGraphs, one_session_decodes_as_it_does_op_by_op_through_three_table_widths) {
  // Up to the golden models' 256 positions: the table width goes 4, 8, 16 blocks.
  constexpr int kPrompt = 5, kSteps = 250;
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const int captured_before = log_.captured;
    gk_model* eager = load(name, false);
    gk_model* graphed = load(name, true);
    ASSERT_TRUE(eager && graphed);
    const int64_t vocab = vocab_of(eager);
    gk_session* a = open_session(eager, kPrompt + kSteps);
    gk_session* b = open_session(graphed, kPrompt + kSteps);
    std::vector<int32_t> prompt(static_cast<size_t>(kPrompt));
    for (int i = 0; i < kPrompt; ++i) prompt[size_t(i)] = int32_t((7 * i + 3) % vocab);
    std::vector<float> la(static_cast<size_t>(vocab)), lb(static_cast<size_t>(vocab));
    ASSERT_EQ(gk_session_step(a, prompt.data(), kPrompt, 0, la.data()), GK_OK) << gk_last_error();
    ASSERT_EQ(gk_session_step(b, prompt.data(), kPrompt, 0, lb.data()), GK_OK) << gk_last_error();
    double worst = 0;
    for (int step = 0; step < kSteps; ++step) {
      // The op-by-op side's greedy token feeds both, so one near tie cannot fork them.
      const int32_t token = argmax(la.data(), vocab);
      ASSERT_EQ(argmax(lb.data(), vocab), token) << "step " << step;
      ASSERT_EQ(gk_session_step(a, &token, 1, 0, la.data()), GK_OK) << gk_last_error();
      ASSERT_EQ(gk_session_step(b, &token, 1, 0, lb.data()), GK_OK) << gk_last_error();
      worst = std::max(worst, row_error(lb.data(), la.data(), vocab));
    }
    EXPECT_LE(worst, 1e-5);
    // One graph per table width the steps went through.
    EXPECT_EQ(log_.captured - captured_before, 3);
    std::printf("[ decode graphs ] %-7s %d steps, worst logits error vs. op by op %.2e\n", name,
                kSteps, worst);
    gk_session_release(a);
    gk_session_release(b);
    gk_model_release(eager);
    gk_model_release(graphed);
  }
  EXPECT_TRUE(log_.failures.empty()) << log_.failures.front();
}

TEST_F(DecodeGraphs, a_batch_that_changes_size_decodes_as_it_does_op_by_op) {
  for (const char* name : kModels) {
    SCOPED_TRACE(name);
    const int captured_before = log_.captured;
    gk_model* models[2] = {load(name, false), load(name, true)};
    ASSERT_TRUE(models[0] && models[1]);
    const int64_t vocab = vocab_of(models[0]);
    // Three sequences with prompts of 3, 9 and 17 tokens; the third leaves after 8 steps.
    std::vector<gk_session*> sessions[2];
    std::vector<int32_t> next(3);
    std::vector<float> row(static_cast<size_t>(vocab));
    for (int k = 0; k < 2; ++k) {
      for (int i = 0; i < 3; ++i) {
        const int length = 3 + 6 * i + (i == 2 ? 2 : 0);
        std::vector<int32_t> prompt(static_cast<size_t>(length));
        for (int j = 0; j < length; ++j) prompt[size_t(j)] = int32_t((11 * j + 5 * i + 1) % vocab);
        gk_session* s = open_session(models[k], 64);
        ASSERT_EQ(gk_session_step(s, prompt.data(), length, 0, row.data()), GK_OK)
            << gk_last_error();
        sessions[k].push_back(s);
        if (k == 0) next[size_t(i)] = argmax(row.data(), vocab);
      }
    }
    double worst = 0;
    for (int step = 0; step < 16; ++step) {
      if (step == 8) {
        for (auto& list : sessions) {
          gk_session_release(list.back());
          list.pop_back();
        }
        next.pop_back();
      }
      const size_t batch = sessions[0].size();
      std::vector<float> logits[2];
      for (int k = 0; k < 2; ++k) {
        logits[k].resize(batch * size_t(vocab));
        ASSERT_EQ(gk_session_step_batch(sessions[k].data(), int32_t(batch), next.data(),
                                        logits[k].data()),
                  GK_OK)
            << gk_last_error();
      }
      for (size_t r = 0; r < batch; ++r) {
        const float* op_by_op = logits[0].data() + r * size_t(vocab);
        const float* replayed = logits[1].data() + r * size_t(vocab);
        worst = std::max(worst, row_error(replayed, op_by_op, vocab));
        next[r] = argmax(op_by_op, vocab);
        EXPECT_EQ(argmax(replayed, vocab), next[r]) << "sequence " << r << ", step " << step;
      }
    }
    EXPECT_LE(worst, 1e-5);
    // Batches of 3 and of 2, each captured on its third step.
    EXPECT_EQ(log_.captured - captured_before, 2);
    for (auto& list : sessions) {
      for (gk_session* s : list) gk_session_release(s);
    }
    gk_model_release(models[0]);
    gk_model_release(models[1]);
  }
  EXPECT_TRUE(log_.failures.empty()) << log_.failures.front();
}

}  // namespace
