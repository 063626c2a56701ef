// cublaslt plugin: matmul through NVIDIA cuBLASLt, opened with dlopen at init, so the
// plugin needs no cuBLAS at build or load time and declines with a reason where it is
// absent. Compiled against cublasLt.h for the types; no cuBLAS symbol is linked.
//
// A call is mapped onto cuBLASLt's column-major model: when out is row-contiguous we ask
// for outᵀ = op(b)ᵀ·op(a)ᵀ (outᵀ is column-major with ld = out's row stride), so a bias
// over N is cuBLASLt's per-row bias; when out is column-contiguous (no bias) we ask for
// out = op(a)·op(b) directly. Each operand becomes N or T from whichever of its strides
// is 1. Descriptors and the heuristic's candidates are cached per (device, shape, strides,
// dtypes, epilogue, alignment) in a mutex-protected map.
//
// Choosing the algorithm: the heuristic's first pick is often not cuBLAS's fastest for the shape
// (on the H100 it cost 3-7% on tf32 4096³/8192³ and some bf16/f16 LLM shapes). So a plan keeps up
// to kTuneCandidates of the heuristic's candidates, and its first launch times each one on that
// call's operands (writing into scratch memory, not the output) from a cold L2, keeps the fastest,
// and says so in gk_explain. Cold, because back-to-back runs on the same operands find them in
// L2, which favours algorithms that are slower when the operands come from memory (on the H100, f16
// 1024³ timed warm kept nvjet 192x48, 10.7 µs cold, over cuBLAS's 128x64, 7.9 µs). So each timed
// run follows a read of twice L2's size (l2_flush.cu), in a buffer that lives only while the
// candidates are timed. That first launch waits for the GPU once; GPUKIT_CUBLASLT_TUNE=0 turns
// timing off (the heuristic's first is used), and a launch into a capturing stream never times (it
// uses the first until an ordinary launch has timed them). Workspace: one 32 MiB buffer per
// (device, stream), taken from host->alloc on first use on that stream and kept until shutdown
// (PyTorch keeps its cuBLAS workspace per (handle, stream) the same way); calls on one stream are
// ordered, so they can share it.
//
// Files: lt_library (the dlopen'ed library), plan (mapping, descriptors, heuristic), tuning
// (timing the candidates); this one is the plugin SDK class: the plan and workspace caches,
// supports() and launch().
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpukit/gpukit_plugin.hpp"
#include "lt_library.h"
#include "matmul_call.h"
#include "plan.h"

namespace gk::cublaslt {
namespace {

using gk::matmul::MatmulProblem;

constexpr size_t kMaxCachedPlans = 1024;
// Streams that get a cached workspace; calls on further streams allocate per call.
constexpr size_t kMaxCachedWorkspaces = 16;

// A workspace of kMaxWorkspaceBytes kept for one (runtime device, stream).
struct Workspace {
  int32_t device;  // runtime device id, as host->alloc takes it
  int ordinal;     // CUDA ordinal, for the synchronize at shutdown
  void* stream;
  void* ptr;
};

class Cublaslt {
 public:
  static constexpr const char* kName = "cublaslt";
  static constexpr const char* kVersion = "0.1.0";
  static constexpr bool kNotesChoice = true;  // an accepted call's reason names the algorithm

  explicit Cublaslt(const gk_host_services* host) : host_(host) {
    const char* tune = std::getenv("GPUKIT_CUBLASLT_TUNE");
    tune_ = !(tune && std::strcmp(tune, "0") == 0);
  }

  ~Cublaslt() {
    release_workspaces();
    plans_.clear();  // before lt_ closes the library their descriptors came from
  }

  bool supports(const gk_kernel_args& args, std::string* why) {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host_, args, 80, 999, &dev);
    Mapping m;
    if (!map_call(p, &m, why)) return false;
    // Only zero-size calls skip the heuristic (launch does nothing for them).
    if (p.m == 0 || p.n == 0 || p.batch_count == 0) return true;
    Plan* plan = find_plan(dev.ordinal, p, m, why);
    if (plan == nullptr) return false;
    std::lock_guard<std::mutex> lock(plan->mu);
    *why = plan->note;  // how it will be served
    return true;
  }

  void launch(const gk_kernel_args& args) {
    gk_plugin_device dev;
    const MatmulProblem p = gk::plugins::matmul_call(host_, args, 80, 999, &dev);
    Mapping m;
    std::string why;
    if (!map_call(p, &m, &why)) gk::plugin::fail(GK_INVALID_ARGUMENT, why);
    if (p.m == 0 || p.n == 0 || p.batch_count == 0) return;
    // Kept per call: it also makes the device's primary context (the one the runtime's
    // tensors and streams live in) current, which cudaGetDevice alone would not check.
    const cudaError_t cerr = cudaSetDevice(dev.ordinal);
    if (cerr != cudaSuccess) gk::plugin::fail(GK_INTERNAL, cudaGetErrorString(cerr));
    Plan* plan = find_plan(dev.ordinal, p, m, &why);
    if (!plan) gk::plugin::fail(GK_INTERNAL, why);
    // The largest workspace any candidate may need (they may all be timed on this call).
    size_t workspace_bytes = 0;
    for (const Candidate& c : plan->candidates) {
      workspace_bytes = std::max(workspace_bytes, c.workspace);
    }
    void* workspace = nullptr;
    bool workspace_per_call = false;
    if (workspace_bytes > 0) {
      workspace = cached_workspace(args.device, dev.ordinal, args.stream);
      if (workspace) {
        workspace_bytes = kMaxWorkspaceBytes;
      } else {
        const gk_status ast = host_->alloc(host_->host_context, args.device, workspace_bytes,
                                           args.stream, &workspace);
        if (ast != GK_OK) gk::plugin::fail(ast, "");  // the host has recorded why
        workspace_per_call = true;
      }
    }
    const double alpha64 = p.alpha, beta64 = p.beta;
    const float alpha32 = float(p.alpha), beta32 = float(p.beta);
    const bool f64 = p.in_dtype == GK_DTYPE_F64;
    const void* alpha = f64 ? static_cast<const void*>(&alpha64) : &alpha32;
    const void* beta = f64 ? static_cast<const void*>(&beta64) : &beta32;
    const auto stream = static_cast<cudaStream_t>(args.stream);
    const LtApi& api = lt_.api();
    cublasStatus_t st;
    {
      std::lock_guard<std::mutex> lock(plan->mu);
      if (p.has_bias)
        api.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias, sizeof(p.bias));
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      if (!plan->timed && cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
          capture == cudaStreamCaptureStatusNone) {
        time_candidates(lt_, host_, plan, p, m, args.device, dev.ordinal, stream, alpha, beta,
                        workspace, workspace_bytes);
      }
      const Candidate& c = plan->candidates[plan->chosen];
      st = api.matmul(lt_.handle(), plan->desc, alpha, m.x_ptr, plan->layout[0], m.y_ptr,
                      plan->layout[1], beta, p.c, plan->layout[2], p.c, plan->layout[3], &c.algo,
                      workspace, c.workspace, stream);
    }
    if (workspace_per_call) host_->free(host_->host_context, args.device, workspace, args.stream);
    if (st != CUBLAS_STATUS_SUCCESS) gk::plugin::fail(GK_INTERNAL, lt_.error("cublasLtMatmul", st));
  }

 private:
  // The cached plan for this call, made on first use. Null with *why when refused.
  Plan* find_plan(int ordinal, const MatmulProblem& p, const Mapping& m, std::string* why) {
    const PlanKey key = plan_key(ordinal, p, m);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second.get();
    auto plan = make_plan(lt_, tune_, p, m, key, why);
    if (!plan) return nullptr;
    // Plans in flight hold their own lock, so only drop the cache when it is idle-sized.
    if (plans_.size() >= kMaxCachedPlans) {
      for (auto& kv : plans_) std::lock_guard<std::mutex> wait(kv.second->mu);
      plans_.clear();
    }
    return plans_.emplace(key, std::move(plan)).first->second.get();
  }

  // The cached workspace of (device, stream), allocating it on the stream's first call.
  // Null when the cache is full or the pool cannot spare kMaxWorkspaceBytes: the caller then
  // allocates what the plan needs for this call only. Sharing one buffer between the calls
  // of a stream is safe because the stream runs them one after another.
  void* cached_workspace(int32_t device, int ordinal, void* stream) {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    for (const Workspace& w : workspaces_)
      if (w.device == device && w.stream == stream) return w.ptr;
    if (workspaces_.size() >= kMaxCachedWorkspaces) return nullptr;
    void* ptr = nullptr;
    if (host_->alloc(host_->host_context, device, kMaxWorkspaceBytes, stream, &ptr) != GK_OK)
      return nullptr;
    workspaces_.push_back({device, ordinal, stream, ptr});
    return ptr;
  }

  // Gives the cached workspaces back. A stream may be gone by now, so wait for the device
  // and free on the null stream instead of the stream the buffer was used on.
  void release_workspaces() {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    for (const Workspace& w : workspaces_) {
      if (cudaSetDevice(w.ordinal) == cudaSuccess) cudaDeviceSynchronize();
      host_->free(host_->host_context, w.device, w.ptr, nullptr);
    }
    workspaces_.clear();
  }

  const gk_host_services* host_;
  LtLibrary lt_;  // declared before the plans, so it outlives them
  bool tune_ = true;  // GPUKIT_CUBLASLT_TUNE != "0"
  std::mutex mu_;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans_;
  std::mutex workspace_mu_;
  std::vector<Workspace> workspaces_;  // ≤ kMaxCachedWorkspaces
};

}  // namespace
}  // namespace gk::cublaslt

GK_PLUGIN_DEFINE(gk::cublaslt::Cublaslt)
