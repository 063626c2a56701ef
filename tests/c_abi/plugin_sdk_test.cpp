// The C++ plugin SDK (gpukit_plugin.hpp): a plugin class becomes the C function table the
// runtime loads, and every way an entry point can fail comes back as a status and a message,
// never as an exception across the C boundary. A stand-in host records what it is told.
#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "gpukit/gpukit_plugin.hpp"

namespace {

struct Host {
  std::string last_error;
  gk_plugin_device device{};
  bool has_device = true;
};

void host_report(void* context, const char* message) {
  static_cast<Host*>(context)->last_error = message;
}

gk_status host_device_info(void* context, int32_t, gk_plugin_device* out) {
  Host* h = static_cast<Host*>(context);
  if (!h->has_device) return GK_NOT_FOUND;
  const size_t size = out->struct_size;
  *out = h->device;
  out->struct_size = size;
  return GK_OK;
}

gk_host_services services(Host* host) {
  gk_host_services s{};
  s.struct_size = sizeof(s);
  s.abi_min = GK_PLUGIN_ABI_VERSION;
  s.abi_max = GK_PLUGIN_ABI_VERSION;
  s.host_context = host;
  s.plugin_name = "sdk_probe";
  s.report_error = host_report;
  s.device_info = host_device_info;
  return s;
}

// Serves op "probe"; attribute "mode" picks how launch ends.
struct Probe {
  static constexpr const char* kName = "sdk_probe";
  static constexpr const char* kVersion = "1.2.3";
  const gk_host_services* host;

  explicit Probe(const gk_host_services* h) : host(h) {
    if (h->plugin_name && std::strcmp(h->plugin_name, "refuse") == 0) {
      gk::plugin::fail(GK_UNAVAILABLE, "the library it needs is missing");
    }
  }
  bool supports(const gk_kernel_args& args, std::string* why) const {
    if (std::strcmp(args.op, "throws") == 0) throw std::runtime_error("supports threw");
    if (std::strcmp(args.op, "notes") == 0) {
      *why = "a note no caller should see";  // Probe has no kNotesChoice
      return true;
    }
    if (std::strcmp(args.op, "probe") != 0) {
      *why = std::string(args.op) + ": not served by sdk_probe";
      return false;
    }
    return true;
  }
  void launch(const gk_kernel_args& args) const {
    switch (gk_attr_int(&args, "mode", 0)) {
      case 1: gk::plugin::fail(GK_INVALID_ARGUMENT, "input 'x' has 3 dims; expected 2");
      case 2: throw std::runtime_error("a std::exception");
      case 3: throw std::bad_alloc();
      case 4: throw 42;
      case 5: gk::plugin::fail(GK_INTERNAL, "");  // reported already
      case 6: gk::plugin::fail(GK_INTERNAL, "probe: names the op itself");
      case 8: gk::plugin::fail(GK_INVALID_ARGUMENT, "op 'probe': names the op the cpu way");
      case 7: {
        const gk_plugin_device d = gk::plugin::call_device(host, args, 80, 90);
        (void)d;
        return;
      }
      default: return;
    }
  }
};

// Declares the SDK's optional members: a label for its messages, and notes on accepted calls.
struct Noted {
  static constexpr const char* kName = "noted";
  static constexpr const char* kVersion = "0.0.1";
  static constexpr const char* kLabel = "noted plugin";
  static constexpr bool kNotesChoice = true;

  explicit Noted(const gk_host_services* h) {
    if (h->plugin_name && std::strcmp(h->plugin_name, "refuse") == 0) {
      gk::plugin::fail(GK_UNAVAILABLE, "refused");
    }
  }
  bool supports(const gk_kernel_args& args, std::string* why) const {
    if (std::strcmp(args.op, "quiet") == 0) return true;
    *why = std::strcmp(args.op, "noted") == 0 ? "algorithm 3 of 8" : "not served";
    return std::strcmp(args.op, "noted") == 0;
  }
  void launch(const gk_kernel_args&) const {}
};

}  // namespace

GK_PLUGIN_DEFINE(Probe)

namespace {

gk_kernel_args call(const char* op, const gk_attr* attrs, int32_t num_attrs) {
  gk_kernel_args a{};
  a.struct_size = sizeof(a);
  a.op = op;
  a.attrs = attrs;
  a.num_attrs = num_attrs;
  return a;
}

gk_attr mode(int64_t m) {
  gk_attr a{};
  a.name = "mode";
  a.type = GK_ATTR_INT;
  a.value.i = m;
  return a;
}

TEST(PluginSdk, TableNamesThePluginAndGuardsEveryEntry) {
  Host host;
  gk_host_services s = services(&host);
  const gk_plugin_api* api = nullptr;
  ASSERT_EQ(gk_plugin_entry(&s, &api), GK_OK);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, sizeof(gk_plugin_api));
  EXPECT_EQ(api->abi_version, uint32_t(GK_PLUGIN_ABI_VERSION));
  EXPECT_STREQ(api->name, "sdk_probe");
  EXPECT_STREQ(api->version, "1.2.3");
  EXPECT_EQ(api->model, nullptr);

  void* state = nullptr;
  ASSERT_EQ(api->init(&s, &state), GK_OK);
  char reason[128] = "";
  gk_kernel_args ok = call("probe", nullptr, 0);
  EXPECT_EQ(api->supports(state, &ok, reason, sizeof(reason)), GK_OK);
  gk_kernel_args other = call("softmax", nullptr, 0);
  EXPECT_EQ(api->supports(state, &other, reason, sizeof(reason)), GK_UNIMPLEMENTED);
  EXPECT_STREQ(reason, "softmax: not served by sdk_probe");
  gk_kernel_args throws = call("throws", nullptr, 0);
  EXPECT_EQ(api->supports(state, &throws, reason, sizeof(reason)), GK_UNIMPLEMENTED);
  EXPECT_STREQ(reason, "supports threw");
  char tiny[8] = "";
  EXPECT_EQ(api->supports(state, &other, tiny, sizeof(tiny)), GK_UNIMPLEMENTED);
  EXPECT_STREQ(tiny, "softmax");  // cut to the buffer, terminated
  EXPECT_EQ(api->supports(state, nullptr, reason, sizeof(reason)), GK_UNIMPLEMENTED);
  EXPECT_STREQ(reason, "malformed gk_kernel_args");
  gk_kernel_args notes = call("notes", nullptr, 0);
  std::strcpy(reason, "untouched");
  EXPECT_EQ(api->supports(state, &notes, reason, sizeof(reason)), GK_OK);
  EXPECT_STREQ(reason, "untouched");  // an accepting supports() says nothing by default

  EXPECT_EQ(api->launch(state, &ok), GK_OK);
  EXPECT_EQ(host.last_error, "");
  struct Case {
    int64_t mode;
    gk_status status;
    const char* message;
  } cases[] = {
      {1, GK_INVALID_ARGUMENT, "probe: input 'x' has 3 dims; expected 2"},
      {2, GK_INTERNAL, "probe: a std::exception"},
      {3, GK_RESOURCE_EXHAUSTED, "probe: out of host memory"},
      {4, GK_INTERNAL, "probe: unknown exception"},
      {6, GK_INTERNAL, "probe: names the op itself"},
      {8, GK_INVALID_ARGUMENT, "op 'probe': names the op the cpu way"},
  };
  for (const Case& c : cases) {
    host.last_error.clear();
    const gk_attr m = mode(c.mode);
    gk_kernel_args a = call("probe", &m, 1);
    EXPECT_EQ(api->launch(state, &a), c.status) << "mode " << c.mode;
    EXPECT_EQ(host.last_error, c.message) << "mode " << c.mode;
  }
  host.last_error = "what the plugin reported";
  const gk_attr silent = mode(5);
  gk_kernel_args a5 = call("probe", &silent, 1);
  EXPECT_EQ(api->launch(state, &a5), GK_INTERNAL);
  EXPECT_EQ(host.last_error, "what the plugin reported");
  EXPECT_EQ(api->launch(state, nullptr), GK_INVALID_ARGUMENT);
  api->shutdown(state);
}

TEST(PluginSdk, CallDeviceChecksKindAndSm) {
  Host host;
  gk_host_services s = services(&host);
  const gk_plugin_api* api = nullptr;
  ASSERT_EQ(gk_plugin_entry(&s, &api), GK_OK);
  void* state = nullptr;
  ASSERT_EQ(api->init(&s, &state), GK_OK);
  const gk_attr m = mode(7);
  gk_kernel_args a = call("probe", &m, 1);
  host.device.kind = GK_DEVICE_KIND_CPU;
  EXPECT_EQ(api->launch(state, &a), GK_INVALID_ARGUMENT);
  EXPECT_EQ(host.last_error, "probe: not a CUDA device");
  host.device.kind = GK_DEVICE_KIND_CUDA;
  host.device.sm_version = 75;
  EXPECT_EQ(api->launch(state, &a), GK_INVALID_ARGUMENT);
  EXPECT_EQ(host.last_error, "probe: SM 75 is outside 80..90");
  host.device.sm_version = 90;
  EXPECT_EQ(api->launch(state, &a), GK_OK);
  host.has_device = false;
  a.device = 3;
  EXPECT_EQ(api->launch(state, &a), GK_INVALID_ARGUMENT);
  EXPECT_EQ(host.last_error, "probe: no device info for device 3");
  api->shutdown(state);
}

TEST(PluginSdk, InitFailureAndHostCheck) {
  Host host;
  gk_host_services s = services(&host);
  s.plugin_name = "refuse";
  const gk_plugin_api* api = nullptr;
  ASSERT_EQ(gk_plugin_entry(&s, &api), GK_OK);
  void* state = nullptr;
  EXPECT_EQ(api->init(&s, &state), GK_UNAVAILABLE);
  EXPECT_EQ(host.last_error, "sdk_probe: the library it needs is missing");

  gk_host_services old = services(&host);
  old.abi_min = old.abi_max = GK_MAKE_VERSION(9, 0);
  api = nullptr;
  EXPECT_EQ(gk_plugin_entry(&old, &api), GK_FAILED_PRECONDITION);
  EXPECT_EQ(api, nullptr);
  EXPECT_NE(host.last_error.find("sdk_probe implements plugin ABI"), std::string::npos);
  EXPECT_EQ(gk_plugin_entry(nullptr, &api), GK_INVALID_ARGUMENT);
  EXPECT_EQ(gk_plugin_entry(&s, nullptr), GK_INVALID_ARGUMENT);
}

TEST(PluginSdk, LabelNamesThePluginInInitAndHostCheckMessages) {
  Host host;
  gk_host_services s = services(&host);
  s.plugin_name = "refuse";
  const gk_plugin_api* api = nullptr;
  ASSERT_EQ(gk::plugin::Plugin<Noted>::entry(&s, &api), GK_OK);
  EXPECT_STREQ(api->name, "noted");  // the manifest's name stays kName
  void* state = nullptr;
  EXPECT_EQ(api->init(&s, &state), GK_UNAVAILABLE);
  EXPECT_EQ(host.last_error, "noted plugin: refused");
  EXPECT_EQ(api->init(&s, nullptr), GK_INVALID_ARGUMENT);

  gk_host_services old = services(&host);
  old.abi_min = old.abi_max = GK_MAKE_VERSION(9, 0);
  EXPECT_EQ(gk::plugin::Plugin<Noted>::entry(&old, &api), GK_FAILED_PRECONDITION);
  EXPECT_EQ(host.last_error.rfind("noted plugin implements plugin ABI", 0), 0u)
      << host.last_error;
}

TEST(PluginSdk, NotesChoiceWritesTheReasonOfAnAcceptedCall) {
  Host host;
  gk_host_services s = services(&host);
  const gk_plugin_api* api = nullptr;
  ASSERT_EQ(gk::plugin::Plugin<Noted>::entry(&s, &api), GK_OK);
  void* state = nullptr;
  ASSERT_EQ(api->init(&s, &state), GK_OK);
  char reason[64] = "";
  gk_kernel_args noted = call("noted", nullptr, 0);
  EXPECT_EQ(api->supports(state, &noted, reason, sizeof(reason)), GK_OK);
  EXPECT_STREQ(reason, "algorithm 3 of 8");
  gk_kernel_args other = call("other", nullptr, 0);
  EXPECT_EQ(api->supports(state, &other, reason, sizeof(reason)), GK_UNIMPLEMENTED);
  EXPECT_STREQ(reason, "not served");
  gk_kernel_args quiet = call("quiet", nullptr, 0);
  std::strcpy(reason, "untouched");
  EXPECT_EQ(api->supports(state, &quiet, reason, sizeof(reason)), GK_OK);
  EXPECT_STREQ(reason, "untouched");  // no note: nothing written
  api->shutdown(state);
}

TEST(PluginSdk, GuardTurnsAModelEntryPointsExceptionsIntoStatusAndMessage) {
  Host host;
  gk_host_services s = services(&host);
  EXPECT_EQ(gk::plugin::guard(&s, "model", [] {}), GK_OK);
  EXPECT_EQ(host.last_error, "");
  struct Case {
    void (*body)();
    gk_status status;
    const char* message;
  } cases[] = {
      {[] { gk::plugin::fail(GK_OUT_OF_RANGE, "model: 9 tokens do not fit"); }, GK_OUT_OF_RANGE,
       "model: 9 tokens do not fit"},
      {[] { throw std::bad_alloc(); }, GK_RESOURCE_EXHAUSTED, "model: out of host memory"},
      {[] { throw std::runtime_error("bad json"); }, GK_INTERNAL, "model: internal error: bad json"},
      {[] { throw 7; }, GK_INTERNAL, "model: internal error: unknown exception"},
  };
  for (const Case& c : cases) {
    host.last_error.clear();
    EXPECT_EQ(gk::plugin::guard(&s, "model", c.body), c.status) << c.message;
    EXPECT_EQ(host.last_error, c.message);
  }
  host.last_error = "what the op-call service recorded";
  EXPECT_EQ(gk::plugin::guard(&s, "model", [] { gk::plugin::fail(GK_INTERNAL, ""); }),
            GK_INTERNAL);
  EXPECT_EQ(host.last_error, "what the op-call service recorded");
}

}  // namespace
