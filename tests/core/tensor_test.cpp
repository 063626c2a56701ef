#include <gtest/gtest.h>

#include <string>

#include "test_runtime.h"

namespace gk::test {
namespace {

std::string last_error() { return gk_last_error(); }

TEST(Tensor, descriptor_reports_explicit_contiguous_strides) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr t = make_tensor(rt.get(), GK_DTYPE_BF16, {2, 3, 4});
  gk_tensor_desc d{};
  d.struct_size = sizeof(d);
  ASSERT_EQ(gk_tensor_get_desc(t.get(), &d), GK_OK);
  EXPECT_EQ(d.dtype, GK_DTYPE_BF16);
  EXPECT_EQ(d.ndim, 3);
  EXPECT_EQ(d.has_strides, 1);
  EXPECT_EQ(d.strides[0], 12);
  EXPECT_EQ(d.strides[1], 4);
  EXPECT_EQ(d.strides[2], 1);
  EXPECT_EQ(gk_tensor_device(t.get()), 0);
  EXPECT_EQ(gk_dtype_size(GK_DTYPE_BF16), 2u);
  EXPECT_STREQ(gk_dtype_name(GK_DTYPE_BF16), "bf16");
}

TEST(Tensor, bad_descriptors_name_the_problem) {
  RuntimePtr rt = make_runtime(test_options());
  gk_tensor* t = nullptr;
  gk_tensor_desc d = desc(42, {2});
  EXPECT_EQ(gk_tensor_create(rt.get(), 0, &d, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("dtype 42"), std::string::npos) << last_error();
  d = desc(GK_DTYPE_F32, {2, -3});
  EXPECT_EQ(gk_tensor_create(rt.get(), 0, &d, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("negative"), std::string::npos) << last_error();
  d = desc(GK_DTYPE_F32, {2});
  d.ndim = 9;
  EXPECT_EQ(gk_tensor_create(rt.get(), 0, &d, nullptr, &t), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("ndim 9"), std::string::npos) << last_error();
}

TEST(Tensor, copies_check_the_byte_count) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr t = make_tensor(rt.get(), GK_DTYPE_F32, {4});
  float v[3] = {};
  EXPECT_EQ(gk_copy_from_host(t.get(), v, sizeof(v), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("12 bytes given"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("holds 16"), std::string::npos) << last_error();
}

TEST(Tensor, copy_between_tensors_and_shape_mismatch) {
  RuntimePtr rt = make_runtime(test_options());
  TensorPtr a = tensor_from(rt.get(), {1, 2, 3, 4}, {2, 2});
  TensorPtr b = make_tensor(rt.get(), GK_DTYPE_F32, {2, 2});
  ASSERT_EQ(gk_copy(b.get(), a.get(), nullptr), GK_OK) << last_error();
  EXPECT_EQ(read_f32(b.get(), 4), (std::vector<float>{1, 2, 3, 4}));
  TensorPtr c = make_tensor(rt.get(), GK_DTYPE_F32, {4});
  EXPECT_EQ(gk_copy(c.get(), a.get(), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("[4] f32"), std::string::npos) << last_error();
}

TEST(Tensor, external_memory_is_released_once_after_the_last_reference) {
  RuntimePtr rt = make_runtime(test_options());
  static int releases = 0;
  releases = 0;
  float data[6] = {1, 2, 3, 4, 5, 6};
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2, 3});
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, [](void*) { ++releases; }, nullptr, &t),
            GK_OK);
  EXPECT_EQ(gk_tensor_data(t), data) << "no copy";
  gk_tensor_retain(t);
  gk_tensor_release(t);
  EXPECT_EQ(releases, 0);
  gk_tensor_release(t);
  EXPECT_EQ(releases, 1);
}

TEST(Tensor, strided_tensor_cannot_be_copied_to_host_directly) {
  RuntimePtr rt = make_runtime(test_options());
  float data[6] = {1, 2, 3, 4, 5, 6};
  gk_tensor_desc d = desc(GK_DTYPE_F32, {3, 2});
  d.has_strides = 1;
  d.strides[0] = 1;
  d.strides[1] = 3;  // a transposed view of a 2x3 array
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &t), GK_OK);
  float back[6];
  EXPECT_EQ(gk_copy_to_host(t, back, sizeof(back), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("not contiguous"), std::string::npos) << last_error();
  gk_tensor_release(t);
}

TEST(Tensor, read_only_tensor_refuses_writes) {
  RuntimePtr rt = make_runtime(test_options());
  float data[2] = {1, 2};
  gk_tensor_desc d = desc(GK_DTYPE_F32, {2});
  d.flags = GK_TENSOR_READ_ONLY;
  gk_tensor* t = nullptr;
  ASSERT_EQ(gk_tensor_from_external(rt.get(), 0, data, &d, nullptr, nullptr, &t), GK_OK);
  EXPECT_EQ(gk_copy_from_host(t, data, sizeof(data), nullptr), GK_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("read-only"), std::string::npos) << last_error();
  gk_tensor_release(t);
}

}  // namespace
}  // namespace gk::test
