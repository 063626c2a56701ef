// DLPack exchange through the C ABI: export/import round trips without copies, read-only,
// strides, refusals that name the problem, and deleters called exactly once.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gpukit/gpukit_dlpack.h"
#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

// A producer's DLManagedTensorVersioned over a caller's array, counting deleter calls.
struct Producer {
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned versioned{};
  DLManagedTensor legacy{};
  int deletes = 0;

  Producer(void* data, DLDataType dtype, std::vector<int64_t> shape_in,
           std::vector<int64_t> strides_in = {})
      : shape(std::move(shape_in)), strides(std::move(strides_in)) {
    DLTensor t{};
    t.data = data;
    t.device.device_type = kDLCPU;
    t.ndim = int32_t(shape.size());
    t.dtype = dtype;
    t.shape = shape.data();
    t.strides = strides.empty() ? nullptr : strides.data();
    versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deletes;
    };
    versioned.dl_tensor = t;
    legacy.dl_tensor = t;
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deletes;
    };
  }
};

constexpr DLDataType kF32{kDLFloat, 32, 1};

std::vector<float> values_of(gk_runtime* rt, gk_tensor* t, size_t n) {
  // Copy through an op so strided views read in logical order.
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  EXPECT_EQ(gk_tensor_get_desc(t, &d), GK_OK);
  TensorPtr out = make_tensor(rt, GK_DTYPE_F32, std::vector<int64_t>(d.shape, d.shape + d.ndim));
  gk_tensor* in[1] = {t};
  gk_tensor* outs[1] = {out.get()};
  gk_op_args a{};
  a.struct_size = sizeof(a);
  a.inputs = in;
  a.num_inputs = 1;
  a.outputs = outs;
  a.num_outputs = 1;
  EXPECT_EQ(gk_op_call(rt, "cast", &a), GK_OK) << last_error();
  return read_f32(out.get(), n);
}

TEST(DLPack, export_then_import_shares_memory_and_releases_once) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr t = tensor_from(rt.get(), {1, 2, 3, 4, 5, 6}, {2, 3});
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(gk_tensor_to_dlpack_versioned(t.get(), 0, &m), GK_OK) << last_error();
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->dl_tensor.device.device_type, kDLCPU);
  EXPECT_EQ(m->dl_tensor.data, gk_tensor_data(t.get()));
  EXPECT_EQ(m->dl_tensor.ndim, 2);
  EXPECT_EQ(m->dl_tensor.shape[1], 3);
  EXPECT_EQ(m->dl_tensor.strides[0], 3);
  EXPECT_EQ(m->dl_tensor.strides[1], 1);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLFloat);
  EXPECT_EQ(m->flags, 0u);
  gk_tensor* back = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), m, &back), GK_OK) << last_error();
  EXPECT_EQ(gk_tensor_data(back), gk_tensor_data(t.get()));
  t.reset();  // the export's reference keeps the memory alive
  EXPECT_EQ(values_of(rt.get(), back, 6), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  gk_tensor_release(back);  // runs the export's deleter, which drops the last reference
}

// A tensor imported from its own runtime's export holds no reference to the runtime of its
// own: the export's tensor does. Both must outlive gk_runtime_destroy and the exported
// tensor's release, in this runtime and in another one (ASan checks the frees).
TEST(DLPack, imported_tensors_keep_their_runtime_after_destroy_and_release) {
  for (bool same_runtime : {true, false}) {
    RuntimePtr rt = make_runtime(test_options());
    RuntimePtr other = make_runtime(test_options());
    TensorPtr t = tensor_from(rt.get(), {1, 2, 3}, {3});
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(gk_tensor_to_dlpack_versioned(t.get(), 0, &m), GK_OK) << last_error();
    gk_tensor* back = nullptr;
    gk_runtime* importer = same_runtime ? rt.get() : other.get();
    ASSERT_EQ(gk_tensor_from_dlpack_versioned(importer, m, &back), GK_OK) << last_error();
    t.reset();
    rt.reset();
    other.reset();
    EXPECT_EQ(read_f32(back, 3), (std::vector<float>{1, 2, 3})) << same_runtime;
    gk_tensor_release(back);  // the last holder: both runtimes go now
  }
}

TEST(DLPack, legacy_export_and_import) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr t = tensor_from(rt.get(), {7, 8}, {2});
  DLManagedTensor* m = nullptr;
  ASSERT_EQ(gk_tensor_to_dlpack(t.get(), &m), GK_OK) << last_error();
  gk_tensor* back = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack(rt.get(), m, &back), GK_OK) << last_error();
  EXPECT_EQ(gk_tensor_data(back), gk_tensor_data(t.get()));
  gk_tensor_release(back);
}

TEST(DLPack, export_deleter_without_import_drops_the_reference) {
  RuntimePtr rt = make_runtime(test_options());
  gk_tensor* t = make_tensor(rt.get(), GK_DTYPE_I64, {0, 4}).release();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(gk_tensor_to_dlpack_versioned(t, DLPACK_FLAG_BITMASK_IS_COPIED, &m), GK_OK);
  EXPECT_EQ(m->flags, DLPACK_FLAG_BITMASK_IS_COPIED);
  EXPECT_EQ(m->dl_tensor.dtype.code, kDLInt);
  EXPECT_EQ(m->dl_tensor.dtype.bits, 64);
  gk_tensor_release(t);
  m->deleter(m);
  EXPECT_EQ(gk_tensor_to_dlpack_versioned(make_tensor(rt.get(), GK_DTYPE_F32, {1}).get(), 8, &m),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("flags 0x8"), std::string::npos) << last_error();
}

TEST(DLPack, import_is_zero_copy_and_calls_the_deleter_exactly_once) {
  RuntimePtr rt = make_runtime(test_options());
  float data[6] = {1, 2, 3, 4, 5, 6};
  Producer p(data, kF32, {2, 3});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &p.versioned, &t), GK_OK) << last_error();
  EXPECT_EQ(gk_tensor_data(t), data);
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(gk_tensor_get_desc(t, &d), GK_OK);
  EXPECT_EQ(d.strides[0], 3) << "NULL strides mean contiguous";
  EXPECT_EQ(d.flags, 0u);
  gk_tensor_retain(t);
  gk_tensor_release(t);
  EXPECT_EQ(p.deletes, 0);
  gk_tensor_release(t);
  EXPECT_EQ(p.deletes, 1);

  Producer q(data, kF32, {6});
  ASSERT_EQ(gk_tensor_from_dlpack(rt.get(), &q.legacy, &t), GK_OK) << last_error();
  gk_tensor_release(t);
  EXPECT_EQ(q.deletes, 1);
}

TEST(DLPack, read_only_import_refuses_writes_by_ops) {
  RuntimePtr rt = make_runtime(test_options());
  float data[4] = {1, 2, 3, 4};
  Producer p(data, kF32, {4});
  p.versioned.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &p.versioned, &t), GK_OK) << last_error();
  TensorPtr owned(t);
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(gk_tensor_get_desc(t, &d), GK_OK);
  EXPECT_EQ(d.flags & GK_TENSOR_READ_ONLY, uint32_t(GK_TENSOR_READ_ONLY));
  gk_tensor* ins[2] = {t, t};
  gk_tensor* outs[1] = {t};
  gk_op_args a{};
  a.struct_size = sizeof(a);
  a.inputs = ins;
  a.num_inputs = 2;
  a.outputs = outs;
  a.num_outputs = 1;
  EXPECT_EQ(gk_op_call(rt.get(), "add", &a), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("read-only"), std::string::npos) << last_error();
  EXPECT_EQ(data[0], 1.0f);
  // Reading is fine, and a re-export says read-only; legacy export refuses.
  EXPECT_EQ(values_of(rt.get(), t, 4), (std::vector<float>{1, 2, 3, 4}));
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(gk_tensor_to_dlpack_versioned(t, 0, &m), GK_OK);
  EXPECT_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  m->deleter(m);
  DLManagedTensor* legacy = nullptr;
  EXPECT_EQ(gk_tensor_to_dlpack(t, &legacy), GK_FAILED_PRECONDITION);
  owned.reset();
  EXPECT_EQ(p.deletes, 1);
}

TEST(DLPack, strided_negative_and_size_one_views_keep_their_strides) {
  RuntimePtr rt = make_runtime(test_options());
  float data[6] = {1, 2, 3, 4, 5, 6};  // viewed as the transpose of [2,3], reversed rows
  Producer p(data + 3, kF32, {3, 2, 1}, {1, -3, 12345});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &p.versioned, &t), GK_OK) << last_error();
  EXPECT_EQ(values_of(rt.get(), t, 6), (std::vector<float>{4, 1, 5, 2, 6, 3}));
  gk_tensor_release(t);
  EXPECT_EQ(p.deletes, 1);
}

TEST(DLPack, zero_size_and_scalar_tensors) {
  RuntimePtr rt = make_runtime(test_options());
  Producer empty(nullptr, kF32, {0, 3});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &empty.versioned, &t), GK_OK)
      << last_error();
  gk_tensor_release(t);
  int64_t v = 42;
  Producer scalar(&v, DLDataType{kDLInt, 64, 1}, {});
  ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &scalar.versioned, &t), GK_OK)
      << last_error();
  EXPECT_EQ(*static_cast<int64_t*>(gk_tensor_data(t)), 42);
  gk_tensor_release(t);
  EXPECT_EQ(empty.deletes + scalar.deletes, 2);
}

TEST(DLPack, every_supported_dtype_maps_both_ways) {
  RuntimePtr rt = make_runtime(test_options());
  const std::vector<std::pair<DLDataType, int32_t>> table = {
      {{kDLFloat, 32, 1}, GK_DTYPE_F32}, {{kDLFloat, 64, 1}, GK_DTYPE_F64},
      {{kDLFloat, 16, 1}, GK_DTYPE_F16}, {{kDLBfloat, 16, 1}, GK_DTYPE_BF16},
      {{kDLInt, 8, 1}, GK_DTYPE_I8},     {{kDLInt, 16, 1}, GK_DTYPE_I16},
      {{kDLInt, 32, 1}, GK_DTYPE_I32},   {{kDLInt, 64, 1}, GK_DTYPE_I64},
      {{kDLUInt, 8, 1}, GK_DTYPE_U8},    {{kDLBool, 8, 1}, GK_DTYPE_BOOL}};
  alignas(8) char data[8] = {};
  for (const auto& [dl, gk_dtype] : table) {
    Producer p(data, dl, {1});
    gk_tensor* t = nullptr;
    ASSERT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &p.versioned, &t), GK_OK) << last_error();
    gk_tensor_desc d{};
    d.struct_size = sizeof(d);
    ASSERT_EQ(gk_tensor_get_desc(t, &d), GK_OK);
    EXPECT_EQ(d.dtype, gk_dtype);
    DLManagedTensorVersioned* m = nullptr;
    ASSERT_EQ(gk_tensor_to_dlpack_versioned(t, 0, &m), GK_OK);
    EXPECT_EQ(m->dl_tensor.dtype.code, dl.code);
    EXPECT_EQ(m->dl_tensor.dtype.bits, dl.bits);
    EXPECT_EQ(m->dl_tensor.dtype.lanes, 1);
    m->deleter(m);
    gk_tensor_release(t);
    EXPECT_EQ(p.deletes, 1);
  }
}

TEST(DLPack, refusals_name_the_problem_and_leave_ownership_with_the_caller) {
  RuntimePtr rt = make_runtime(test_options());
  alignas(16) float data[8] = {};
  gk_tensor* t = nullptr;

  Producer complex(data, DLDataType{kDLComplex, 64, 1}, {2});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &complex.versioned, &t),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("complex (code 5, bits 64, lanes 1)"), std::string::npos)
      << last_error();
  Producer lanes(data, DLDataType{kDLFloat, 32, 4}, {2});
  EXPECT_EQ(gk_tensor_from_dlpack(rt.get(), &lanes.legacy, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("lanes 4"), std::string::npos) << last_error();

  Producer rocm(data, kF32, {2});
  rocm.versioned.dl_tensor.device.device_type = kDLROCM;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &rocm.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("kDLROCM (10)"), std::string::npos) << last_error();

  Producer cuda(data, kF32, {2});
  cuda.versioned.dl_tensor.device = {kDLCUDA, 3};
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &cuda.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("CUDA device 3"), std::string::npos) << last_error();

  Producer deep(data, kF32, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &deep.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ndim 9"), std::string::npos) << last_error();

  Producer null_data(nullptr, kF32, {2});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &null_data.versioned, &t),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("data is NULL"), std::string::npos) << last_error();

  Producer huge(data, kF32, {2, 2}, {int64_t(1) << 62, 1});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &huge.versioned, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("strides"), std::string::npos) << last_error();

  Producer misaligned(reinterpret_cast<char*>(data) + 1, kF32, {2});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &misaligned.versioned, &t),
            GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("aligned"), std::string::npos) << last_error();

  Producer negative(data, kF32, {2, -1});
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &negative.versioned, &t),
            GK_INVALID_ARGUMENT);

  for (Producer* p : {&complex, &lanes, &rocm, &cuda, &deep, &null_data, &huge, &misaligned,
                      &negative}) {
    EXPECT_EQ(p->deletes, 0) << "refused imports leave ownership with the caller";
  }
}

TEST(DLPack, major_version_mismatch_calls_the_deleter) {
  RuntimePtr rt = make_runtime(test_options());
  float data[2] = {};
  Producer p(data, kF32, {2});
  p.versioned.version = {2, 0};
  gk_tensor* t = nullptr;
  EXPECT_EQ(gk_tensor_from_dlpack_versioned(rt.get(), &p.versioned, &t), GK_FAILED_PRECONDITION);
  EXPECT_NE(last_error().find("version 2.0"), std::string::npos) << last_error();
  EXPECT_EQ(p.deletes, 1);
}

TEST(DLPack, exported_evictable_memory_stays_resident_until_the_deleter_runs) {
  RuntimePtr rt = make_runtime(test_options());
  const uint64_t n = 2 << 20;
  gk_alloc_args a{};
  a.struct_size = sizeof(a);
  a.size = n;
  a.flags = GK_BUFFER_EVICTABLE;
  gk_buffer* buffer = nullptr;
  ASSERT_EQ(gk_buffer_alloc(rt.get(), &a, &buffer), GK_OK) << gk_last_error();
  gk_tensor_desc d = desc(GK_DTYPE_U8, {int64_t(n)});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_buffer(buffer, 0, &d, &t), GK_OK) << gk_last_error();
  DLManagedTensorVersioned* m = nullptr;
  ASSERT_EQ(gk_tensor_to_dlpack_versioned(t, 0, &m), GK_OK) << gk_last_error();
  std::memset(m->dl_tensor.data, 0x3c, n);  // the consumer writes through the raw pointer
  // A budget that can only be met by spilling the exported buffer: it must not move.
  gk_memory_stats s{};
  s.struct_size = sizeof(s);
  ASSERT_EQ(gk_memory_stats_get(rt.get(), 0, &s), GK_OK);
  ASSERT_EQ(gk_memory_set_budget(rt.get(), 0, s.bytes_in_use), GK_OK);
  gk_alloc_args more = a;
  more.size = 4096;
  more.flags = 0;
  gk_buffer* other = nullptr;
  EXPECT_EQ(gk_buffer_alloc(rt.get(), &more, &other), GK_RESOURCE_EXHAUSTED);
  int32_t spilled = -1;
  ASSERT_EQ(gk_buffer_is_spilled(buffer, &spilled), GK_OK);
  EXPECT_EQ(spilled, 0) << "an exported buffer was spilled under the consumer";
  EXPECT_EQ(static_cast<uint8_t*>(m->dl_tensor.data)[n - 1], 0x3c);
  // Once the consumer is done, the buffer may be spilled again.
  m->deleter(m);
  EXPECT_EQ(gk_buffer_alloc(rt.get(), &more, &other), GK_OK) << gk_last_error();
  ASSERT_EQ(gk_buffer_is_spilled(buffer, &spilled), GK_OK);
  EXPECT_EQ(spilled, 1);
  gk_tensor_release(t);
  EXPECT_EQ(gk_buffer_free(other, nullptr), GK_OK);
  EXPECT_EQ(gk_buffer_free(buffer, nullptr), GK_OK);
}

}  // namespace
}  // namespace gk::test
