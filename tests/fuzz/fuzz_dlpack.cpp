// Fuzz target: DLPack import, legacy DLManagedTensor and DLManagedTensorVersioned, with
// fuzzed version, flags, device, dtype, ndim, shape, strides, data pointer, byte offset and
// deleter. The library must refuse what it cannot wrap with a status, call the deleter
// exactly once (on the last release of an imported tensor, or at once for another major
// version) and never otherwise. An imported tensor whose elements all lie inside the host
// array is run through an op, exported and imported again.
//
// Input (fuzz_input.h): form (bit 0: versioned), version major and minor, flags, device
// type and id, dtype code, bits and lanes, ndim, shape (or NULL), strides (or NULL), data
// pointer, byte offset, deleter (or NULL), then the action on an imported tensor.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <type_traits>

#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "gpukit/gpukit.h"
#include "gpukit/gpukit_dlpack.h"

namespace gk::fuzz {
namespace {

constexpr size_t kHostBytes = 4096;
alignas(64) unsigned char host_array[kHostBytes];

// The deleter's calls, through manager_ctx.
struct Producer {
  int deletes = 0;
};

template <typename Managed>
void count_delete(Managed* self) {
  ++static_cast<Producer*>(self->manager_ctx)->deletes;
}

uint32_t decode_version(Input& in) {
  uint8_t s = in.byte();
  if ((s & 3) != 3) return DLPACK_MAJOR_VERSION;
  static constexpr uint32_t kOthers[] = {0, 2, 1000, UINT32_MAX};
  return kOthers[(s >> 2) % std::size(kOthers)];
}

DLDevice decode_device(Input& in) {
  static constexpr int32_t kTypes[] = {
      kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged, kDLROCM, kDLOneAPI, 0, -1, 1000,
  };
  uint8_t s = in.byte();
  DLDevice d{};
  d.device_type = DLDeviceType((s & 3) != 3 ? kDLCPU : kTypes[(s >> 2) % std::size(kTypes)]);
  uint8_t id = in.byte();
  d.device_id = (id & 3) != 3 ? 0 : int32_t(in.integer());
  return d;
}

DLDataType decode_dtype(Input& in) {
  static constexpr uint8_t kBits[] = {8, 16, 32, 64, 0, 1, 4, 128, 255, 7};
  DLDataType t{};
  uint8_t code = in.byte();
  t.code = code < 0xE0 ? code % 8 : code;
  uint8_t bits = in.byte();
  t.bits = kBits[bits % std::size(kBits)];
  uint8_t lanes = in.byte();
  t.lanes = (lanes & 7) != 7 ? 1 : (lanes >> 3) % 2 ? 0 : in.raw<uint16_t>();
  return t;
}

// data: NULL, inside the host array (possibly misaligned), or an address nothing owns.
void* decode_data(Input& in) {
  uint8_t s = in.byte();
  switch (s & 3) {
    case 0:
      return nullptr;
    case 1:
    case 2:
      return host_array + in.raw<uint16_t>() % kHostBytes;
    default:
      return reinterpret_cast<void*>(uintptr_t(in.raw<uint64_t>()));
  }
}

uint64_t decode_byte_offset(Input& in) {
  uint8_t s = in.byte();
  switch (s & 3) {
    case 0:
      return 0;
    case 1:
      return in.raw<uint16_t>() % (kHostBytes + 16);
    case 2:
      return uint64_t(in.integer());
    default:
      return in.raw<uint64_t>();
  }
}

// Whether every element of an imported tensor lies inside the host array, so an op may
// read it (the library cannot know the producer's bounds; this caller does).
bool inside_host_array(const gk_tensor* t, const gk_tensor_desc& d) {
  size_t size = gk_dtype_size(d.dtype);
  int64_t numel = small_numel(d, kOpElements);
  if (size == 0 || numel <= 0) return false;
  auto first = reinterpret_cast<uintptr_t>(gk_tensor_data(t));
  auto base = reinterpret_cast<uintptr_t>(host_array);
  if (first < base || first >= base + kHostBytes) return false;
  // numel <= kOpElements bounds each dim, so these sums of |(n-1)·stride| cannot overflow
  // for strides the library checked to reach less than 2^63 bytes.
  __int128 lo = 0, hi = 0;
  for (int32_t k = 0; k < d.ndim; ++k) {
    __int128 reach = __int128(d.shape[k] - 1) * d.strides[k];
    (reach < 0 ? lo : hi) += reach;
  }
  __int128 start = __int128(first - base) + lo * __int128(size);
  __int128 end = __int128(first - base) + (hi + 1) * __int128(size);
  return start >= 0 && end <= __int128(kHostBytes);
}

// An op on the imported tensor: reads it; writes it in place, which must fail when it is
// read-only; a versioned export and import back, whose deleters run on release.
void use_imported(gk_runtime* rt, gk_tensor* t, uint8_t action) {
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  if (gk_tensor_get_desc(t, &d) != GK_OK) contract_broken("gk_tensor_get_desc failed");
  if (!inside_host_array(t, d)) return;
  gk_tensor* inputs[1] = {t};
  gk_op_args args{};
  args.struct_size = sizeof(args);
  args.inputs = inputs;
  args.num_inputs = 1;
  switch (action % 3) {
    case 0: {
      gk_tensor* out = nullptr;
      if (gk_op_call_alloc(rt, "neg", &args, 1, &out, nullptr) == GK_OK && !out) {
        contract_broken("gk_op_call_alloc returned GK_OK without an output");
      }
      gk_tensor_release(out);
      break;
    }
    case 1: {
      args.outputs = inputs;
      args.num_outputs = 1;
      gk_status s = gk_op_call(rt, "relu", &args);
      if (s == GK_OK && (d.flags & GK_TENSOR_READ_ONLY)) {
        contract_broken("an op wrote into a read-only DLPack import");
      }
      break;
    }
    default: {
      DLManagedTensorVersioned* exported = nullptr;
      if (gk_tensor_to_dlpack_versioned(t, 0, &exported) != GK_OK) break;
      gk_tensor* again = nullptr;
      if (gk_tensor_from_dlpack_versioned(rt, exported, &again) == GK_OK) {
        gk_tensor_release(again);  // calls the export's deleter
      } else {
        exported->deleter(exported);
      }
      break;
    }
  }
}

template <typename Managed>
void import_and_check(gk_runtime* rt, Managed& managed, Producer& producer, uint8_t action) {
  gk_tensor* t = nullptr;
  gk_status s;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    s = gk_tensor_from_dlpack_versioned(rt, &managed, &t);
  } else {
    s = gk_tensor_from_dlpack(rt, &managed, &t);
  }
  bool foreign_major = false;
  if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
    foreign_major = managed.version.major != DLPACK_MAJOR_VERSION;
  }
  if (s != GK_OK) {
    int expected = foreign_major && managed.deleter ? 1 : 0;
    if (producer.deletes != expected) {
      contract_broken(foreign_major ? "a refused foreign-major tensor's deleter was not called once"
                                    : "a refused import called the producer's deleter");
    }
    return;
  }
  if (!t) contract_broken("DLPack import returned GK_OK without a tensor");
  if (foreign_major) contract_broken("a DLPack tensor of another major version was imported");
  if (producer.deletes != 0) contract_broken("the deleter ran while the import is alive");
  use_imported(rt, t, action);
  gk_tensor_release(t);
  if (producer.deletes != (managed.deleter ? 1 : 0)) {
    contract_broken("the deleter did not run exactly once on the last release");
  }
}

void run_one(const uint8_t* data, size_t size) {
  gk_runtime* rt = shared_runtime();
  Input in(data, size);
  bool versioned = in.byte() & 1;
  DLPackVersion version;
  version.major = decode_version(in);
  version.minor = in.byte() % 4u;
  uint8_t flags_selector = in.byte();
  uint64_t flags = (flags_selector & 3) == 3 ? in.raw<uint64_t>() : flags_selector & 3;

  DLTensor dl{};
  dl.device = decode_device(in);
  dl.dtype = decode_dtype(in);
  dl.ndim = in.ndim();
  // Shape and strides hold exactly ndim entries (up to 64), so AddressSanitizer flags any
  // read past ndim; new[] of 0 gives a valid, non-null pointer for ndim 0.
  size_t entries = dl.ndim > 0 ? size_t(dl.ndim < 64 ? dl.ndim : 64) : 0;
  std::unique_ptr<int64_t[]> shape(new int64_t[entries]);
  std::unique_ptr<int64_t[]> strides(new int64_t[entries]);
  for (size_t k = 0; k < entries; ++k) shape[k] = in.integer();
  uint8_t arrays = in.byte();
  if (arrays & 1) {
    for (size_t k = 0; k < entries; ++k) strides[k] = in.integer();
  }
  dl.shape = (arrays & 2) && (arrays & 4) ? nullptr : shape.get();
  dl.strides = arrays & 1 ? strides.get() : nullptr;
  dl.data = decode_data(in);
  dl.byte_offset = decode_byte_offset(in);
  bool with_deleter = (in.byte() & 3) != 0;
  uint8_t action = in.byte();

  Producer producer;
  if (versioned) {
    DLManagedTensorVersioned managed{};
    managed.version = version;
    managed.manager_ctx = &producer;
    managed.deleter = with_deleter ? &count_delete<DLManagedTensorVersioned> : nullptr;
    managed.flags = flags;
    managed.dl_tensor = dl;
    import_and_check(rt, managed, producer, action);
  } else {
    DLManagedTensor managed{};
    managed.manager_ctx = &producer;
    managed.deleter = with_deleter ? &count_delete<DLManagedTensor> : nullptr;
    managed.dl_tensor = dl;
    import_and_check(rt, managed, producer, action);
  }
}

}  // namespace
}  // namespace gk::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gk::fuzz::run_one(data, size);
  return 0;
}
