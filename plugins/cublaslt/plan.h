// One matmul call on cuBLASLt: its mapping onto cuBLASLt's column-major model (see
// plugin.cpp's top comment) and the plan made for it once (descriptors and the heuristic's
// candidate algorithms), which the plugin caches per PlanKey.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpukit/gpukit_plugin.h"
#include "lt_library.h"
#include "matmul_problem.h"

namespace gk::cublaslt {

constexpr uint64_t kMaxWorkspaceBytes = 32ull << 20;  // NVIDIA's advice for Hopper
// The most heuristic candidates a plan keeps for timing (tuning.cpp).
constexpr int kTuneCandidates = 8;

// One column-major operand: op, the stored matrix's ld.
struct ColMajor {
  cublasOperation_t op;
  int64_t rows, cols, ld;  // of the stored matrix
};

// Everything a plan depends on.
using PlanKey = std::array<int64_t, 24>;
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<size_t>(v)) * 1099511628211ull;
    return h;
  }
};

// The cuBLASLt mapping of one call.
struct Mapping {
  bool swapped;            // computing outᵀ = op(b)ᵀ·op(a)ᵀ
  ColMajor x, y;           // cuBLASLt's A and B
  const void* x_ptr;
  const void* y_ptr;
  int64_t x_bs, y_bs, d_bs;
  int64_t rows, cols, k;   // of D
  int64_t ldd;
  cublasLtEpilogue_t epilogue;
};

// One of the heuristic's algorithms for a plan, and what it took when timed.
struct Candidate {
  cublasLtMatmulAlgo_t algo;
  size_t workspace;
  float us = -1;  // median µs per call at the first launch; -1: not timed or it failed
};

struct Plan {
  const LtApi* api = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout[4] = {};  // A, B, C, D
  std::vector<Candidate> candidates;      // the heuristic's order, best guess first
  size_t chosen = 0;
  bool timed = false;  // the candidates were timed (or timing is off or failed: see note)
  std::string note;    // how the algorithm was chosen, for gk_explain
  std::mutex mu;  // the bias pointer is a descriptor attribute: one call at a time
  ~Plan() {
    if (desc) api->desc_destroy(desc);
    for (auto* l : layout)
      if (l) api->layout_destroy(l);
  }
};


// The cuBLASLt mapping of call `p`; false with *why when cuBLASLt cannot serve it.
bool map_call(const gk::matmul::MatmulProblem& p, Mapping* m, std::string* why);

PlanKey plan_key(int ordinal, const gk::matmul::MatmulProblem& p, const Mapping& m);

// Builds descriptors and asks the heuristic for its candidates (only the first one unless
// `tune`). Null with *why on refusal.
std::unique_ptr<Plan> make_plan(const LtLibrary& lt, bool tune,
                                const gk::matmul::MatmulProblem& p, const Mapping& m,
                                const PlanKey& key, std::string* why);

// Times every candidate of `plan` on this call's operands, writing D into scratch memory
// (C is only read), and keeps the fastest. Called with plan->mu held, at the plan's first
// ordinary launch; blocks the host until the timed runs are done. On any failure the plan
// keeps the heuristic's first and the note says why. `device` is the runtime's device id
// (for host->alloc), `ordinal` its CUDA ordinal.
void time_candidates(const LtLibrary& lt, const gk_host_services* host, Plan* plan,
                     const gk::matmul::MatmulProblem& p, const Mapping& m, int32_t device,
                     int ordinal, cudaStream_t stream, const void* alpha, const void* beta,
                     void* workspace, size_t workspace_bytes);

}  // namespace gk::cublaslt
