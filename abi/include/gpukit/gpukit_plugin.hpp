/*
 * gpukit_plugin.hpp — the plugin SDK for C++ plugins: header-only, over gpukit_plugin.h.
 *
 * A kernel plugin is a class; this header turns it into the C function table the runtime loads,
 * with every entry point guarded (an exception becomes a status and a message, never a
 * crash across the C boundary) and the host checked before anything else runs:
 *
 *   struct MyPlugin {
 *     static constexpr const char* kName = "my_plugin";   // as in the manifest
 *     static constexpr const char* kVersion = "1.0.0";
 *     explicit MyPlugin(const gk_host_services* host);    // init; throw to refuse loading
 *     // true to accept the call; false declines it, with *why naming what is not served
 *     bool supports(const gk_kernel_args& args, std::string* why);
 *     // runs the call; throw gk::plugin::Failure (or any exception) on error
 *     void launch(const gk_kernel_args& args);
 *   };
 *   GK_PLUGIN_DEFINE(MyPlugin)   // exports gk_plugin_entry, the only symbol a plugin needs
 *
 * Optional members of the class:
 *   static constexpr const char* kLabel = "my plugin";  // names it in init and ABI-check
 *                                                         // messages (default: kName)
 *   static constexpr bool kNotesChoice = true;  // supports() may set *why when it accepts,
 *                                               // saying how it will serve the call (an
 *                                               // algorithm it chose), for gk_explain
 *
 * What each entry point returns when it throws:
 *   init      the Failure's status (GK_INTERNAL for other exceptions), its message reported
 *   supports  GK_UNIMPLEMENTED (the call is declined), the message as the reason
 *   launch    the Failure's status (GK_INTERNAL for other exceptions), the message reported
 *             prefixed with the op's name unless it names the op first already ("matmul: …"
 *             or "op 'matmul': …"); a Failure with an empty message reports nothing (the
 *             plugin has reported the error itself)
 * A failing host check (ABI version, services missing) refuses the entry itself.
 *
 * A model plugin fills its gk_plugin_api and gk_model_api itself and wraps each model entry
 * point in gk::plugin::guard (below), which turns exceptions into a status and a message.
 */
#ifndef GPUKIT_PLUGIN_HPP_
#define GPUKIT_PLUGIN_HPP_

#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "gpukit/gpukit_plugin.h"

namespace gk {
namespace plugin {

/* What a plugin throws to fail with a given status. */
struct Failure : std::exception {
  gk_status status;
  std::string message;
  Failure(gk_status s, std::string m) : status(s), message(std::move(m)) {}
  const char* what() const noexcept override { return message.c_str(); }
};

[[noreturn]] inline void fail(gk_status status, std::string message) {
  throw Failure(status, std::move(message));
}

/* Sends `message` to the host, which keeps it as the error of the failing call. */
inline void report(const gk_host_services* host, const std::string& message) {
  if (host && host->report_error) host->report_error(host->host_context, message.c_str());
}

/* Every gk_dtype: its name, bytes per element (0 for a block-quantized one), elements per
 * block (1 for a plain dtype) and bytes per block. The one table of them: the runtime's own
 * dtype functions (gk_dtype_name, the op rules, the loaders) read it too. */
struct DtypeInfo {
  int32_t dtype;
  const char* name;
  size_t size;
  uint32_t block;
  uint32_t block_bytes;
};
inline constexpr DtypeInfo kDtypes[] = {
    {GK_DTYPE_F32, "f32", 4, 1, 4},
    {GK_DTYPE_F64, "f64", 8, 1, 8},
    {GK_DTYPE_F16, "f16", 2, 1, 2},
    {GK_DTYPE_BF16, "bf16", 2, 1, 2},
    {GK_DTYPE_I8, "i8", 1, 1, 1},
    {GK_DTYPE_I16, "i16", 2, 1, 2},
    {GK_DTYPE_I32, "i32", 4, 1, 4},
    {GK_DTYPE_I64, "i64", 8, 1, 8},
    {GK_DTYPE_U8, "u8", 1, 1, 1},
    {GK_DTYPE_BOOL, "bool", 1, 1, 1},
    /* GGUF's blocks, as llama.cpp's block_q8_0 ... block_q6_K lay them out. */
    {GK_DTYPE_Q8_0, "q8_0", 0, 32, 34},
    {GK_DTYPE_Q4_0, "q4_0", 0, 32, 18},
    {GK_DTYPE_Q4_1, "q4_1", 0, 32, 20},
    {GK_DTYPE_Q4_K, "q4_k", 0, 256, 144},
    {GK_DTYPE_Q5_K, "q5_k", 0, 256, 176},
    {GK_DTYPE_Q6_K, "q6_k", 0, 256, 210},
};

/* The entry of `dtype` in kDtypes, or NULL for a value that is no gk_dtype. */
constexpr const DtypeInfo* dtype_info(int32_t dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return &d;
  }
  return nullptr;
}
/* "f32", "bf16", ...; "unknown" for a value that is no gk_dtype. */
constexpr const char* dtype_name(int32_t dtype) {
  const DtypeInfo* d = dtype_info(dtype);
  return d ? d->name : "unknown";
}
/* Bytes per element; 0 for a block-quantized or unknown dtype. */
constexpr size_t dtype_size(int32_t dtype) {
  const DtypeInfo* d = dtype_info(dtype);
  return d ? d->size : 0;
}

/* The device a call runs on, from the host. Throws GK_INVALID_ARGUMENT when the host knows
 * no such device, or when it is not a CUDA device with an SM in [sm_min, sm_max] (pass
 * sm_min = 0 to accept any device kind). */
inline gk_plugin_device call_device(const gk_host_services* host, const gk_kernel_args& args,
                                    int32_t sm_min = 0, int32_t sm_max = 0) {
  gk_plugin_device dev;
  std::memset(&dev, 0, sizeof(dev));
  dev.struct_size = sizeof(dev);
  if (host->device_info(host->host_context, args.device, &dev) != GK_OK) {
    fail(GK_INVALID_ARGUMENT, "no device info for device " + std::to_string(args.device));
  }
  if (sm_min > 0) {
    if (dev.kind != GK_DEVICE_KIND_CUDA) fail(GK_INVALID_ARGUMENT, "not a CUDA device");
    if (dev.sm_version < sm_min || dev.sm_version > sm_max) {
      fail(GK_INVALID_ARGUMENT, "SM " + std::to_string(dev.sm_version) + " is outside " +
                                    std::to_string(sm_min) + ".." + std::to_string(sm_max));
    }
  }
  return dev;
}

namespace detail {
/* Runs `fn` and returns GK_OK, or the status of what it threw with a message reported to the
 * host: a Failure's as failure(message), nothing when that is empty (the plugin has reported
 * already); any other exception's as other(status, text): GK_RESOURCE_EXHAUSTED with "out of
 * host memory" for std::bad_alloc, GK_INTERNAL with what() or "unknown exception". */
template <class Fn, class OnFailure, class OnOther>
gk_status catch_all(const gk_host_services* host, Fn&& fn, OnFailure&& failure,
                    OnOther&& other) noexcept {
  try {
    fn();
    return GK_OK;
  } catch (const Failure& e) {
    if (!e.message.empty()) report(host, failure(e.message));
    return e.status;
  } catch (const std::bad_alloc&) {
    report(host, other(GK_RESOURCE_EXHAUSTED, "out of host memory"));
    return GK_RESOURCE_EXHAUSTED;
  } catch (const std::exception& e) {
    report(host, other(GK_INTERNAL, e.what()));
    return GK_INTERNAL;
  } catch (...) {
    report(host, other(GK_INTERNAL, "unknown exception"));
    return GK_INTERNAL;
  }
}
}  // namespace detail

/* For the entry points of a model plugin (gk_model_api), which Plugin<P> does not make:
 * runs `fn` and returns GK_OK, or the status of what it threw, its message reported to the
 * host: a Failure's message as it is (its own context; empty when the plugin or the host's
 * op-call service has reported already), "<label>: out of host memory" for std::bad_alloc,
 * "<label>: internal error: <what>" (or "unknown exception") for another. */
template <class Fn>
gk_status guard(const gk_host_services* host, const char* label, Fn&& fn) noexcept {
  return detail::catch_all(
      host, std::forward<Fn>(fn), [](const std::string& message) { return message; },
      [label](gk_status status, const std::string& text) {
        return std::string(label) + (status == GK_INTERNAL ? ": internal error: " : ": ") + text;
      });
}

namespace detail {
/* P::kLabel where P declares it, else P::kName. */
template <class P, class = void>
struct Label {
  static constexpr const char* value = P::kName;
};
template <class P>
struct Label<P, std::void_t<decltype(P::kLabel)>> {
  static constexpr const char* value = P::kLabel;
};
/* P::kNotesChoice where P declares it, else false. */
template <class P, class = void>
struct NotesChoice : std::false_type {};
template <class P>
struct NotesChoice<P, std::void_t<decltype(P::kNotesChoice)>>
    : std::bool_constant<P::kNotesChoice> {};
}  // namespace detail

/* The function table of plugin class P; GK_PLUGIN_DEFINE exports it. */
template <class P>
class Plugin {
 public:
  struct State {
    const gk_host_services* host;
    P impl;
  };

  static gk_status entry(const gk_host_services* host, const gk_plugin_api** api) {
    if (api == nullptr) return GK_INVALID_ARGUMENT;
    const gk_status status = gk_plugin_check_host(host, kLabel);
    if (status == GK_OK) *api = &kApi;
    return status;
  }

 private:
  static constexpr const char* kLabel = detail::Label<P>::value;

  static gk_status init(const gk_host_services* host, void** state) {
    if (state == nullptr) return GK_INVALID_ARGUMENT;
    auto named = [](const std::string& text) { return std::string(kLabel) + ": " + text; };
    return detail::catch_all(
        host, [&] { *state = new State{host, P(host)}; }, named,
        [&](gk_status, const std::string& text) { return named(text); });
  }

  static void shutdown(void* state) { delete static_cast<State*>(state); }

  /* `message` prefixed with the op's name, unless it names the op first already. */
  static std::string about(const std::string& op, const std::string& message) {
    const bool named = message.compare(0, op.size() + 1, op + ":") == 0 ||
                       message.compare(0, op.size() + 5, "op '" + op + "'") == 0;
    return named ? message : op + ": " + message;
  }

  static gk_status supports(void* state, const gk_kernel_args* args, char* reason,
                            size_t capacity) {
    std::string why;
    try {
      if (args == nullptr || args->struct_size < GK_KERNEL_ARGS_SIZE || args->op == nullptr) {
        why = "malformed gk_kernel_args";
      } else if (static_cast<State*>(state)->impl.supports(*args, &why)) {
        if (detail::NotesChoice<P>::value && !why.empty()) write(why, reason, capacity);
        return GK_OK;
      }
    } catch (const std::exception& e) {
      why = e.what();
    } catch (...) {
      why = "unknown exception";
    }
    write(why, reason, capacity);
    return GK_UNIMPLEMENTED;
  }

  static void write(const std::string& text, char* reason, size_t capacity) {
    if (reason != nullptr && capacity > 0) std::snprintf(reason, capacity, "%s", text.c_str());
  }

  static gk_status launch(void* state, const gk_kernel_args* args) {
    State* s = static_cast<State*>(state);
    const char* op = args && args->op ? args->op : "(null op)";
    auto about_op = [op](const std::string& text) { return about(op, text); };
    return detail::catch_all(
        s->host,
        [&] {
          if (args == nullptr || args->struct_size < GK_KERNEL_ARGS_SIZE || args->op == nullptr) {
            fail(GK_INVALID_ARGUMENT, "malformed gk_kernel_args");
          }
          s->impl.launch(*args);
        },
        about_op, [&](gk_status, const std::string& text) { return about_op(text); });
  }

  /* A kernel plugin: no model API (gk_model_api). */
  static constexpr gk_plugin_api kApi = {sizeof(gk_plugin_api), GK_PLUGIN_ABI_VERSION,
                                         P::kName, P::kVersion, init, shutdown, supports,
                                         launch, nullptr};
};

}  // namespace plugin
}  // namespace gk

/* Exports gk_plugin_entry for plugin class P (at namespace scope, once per plugin). */
#define GK_PLUGIN_DEFINE(P)                                                              \
  extern "C" GK_PLUGIN_EXPORT gk_status gk_plugin_entry(const gk_host_services* host,   \
                                                        const gk_plugin_api** api) {    \
    return ::gk::plugin::Plugin<P>::entry(host, api);                                    \
  }

#endif /* GPUKIT_PLUGIN_HPP_ */
