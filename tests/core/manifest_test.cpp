// White-box tests of the manifest reader: every error carries file:line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "plugin/manifest.h"

namespace gk {
namespace {

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gk_manifest_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& text) {
    std::string path = (dir_ / "m.yaml").string();
    std::ofstream(path) << text;
    return path;
  }

  // The message read_manifest fails with.
  std::string error_of(const std::string& text) {
    try {
      read_manifest(write(text));
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), GK_INVALID_ARGUMENT);
      return e.message();
    }
    ADD_FAILURE() << "manifest was accepted";
    return "";
  }

  std::filesystem::path dir_;
};

const char* kValid = R"(schema: 1
name: matmul_sm90
version: 1.2.0
plugin_abi: "1.0"
library: ../plugins/libgpukit_matmul_sm90.so
family: matmul
device: cuda
sm: {min: 90, max: 90}
priority: 100
ops:
  - {name: matmul, dtypes: [bf16, f16]}
)";

TEST_F(ManifestTest, valid_manifest_is_read_with_resolved_library_path) {
  Manifest m = read_manifest(write(kValid));
  EXPECT_EQ(m.name, "matmul_sm90");
  EXPECT_EQ(m.device, GK_DEVICE_KIND_CUDA);
  EXPECT_TRUE(m.matches_sm(90));
  EXPECT_FALSE(m.matches_sm(80));
  EXPECT_EQ(m.priority, 100);
  EXPECT_EQ(m.plugin_abi, GK_MAKE_VERSION(1, 0));
  ASSERT_EQ(m.ops.size(), 1u);
  EXPECT_EQ(m.ops[0].dtypes, (std::vector<int32_t>{GK_DTYPE_BF16, GK_DTYPE_F16}));
  EXPECT_EQ(m.library, (dir_.parent_path() / "plugins/libgpukit_matmul_sm90.so").string());
  EXPECT_EQ(m.library_line, 5);
}

TEST_F(ManifestTest, sm_list_form) {
  std::string text = kValid;
  text.replace(text.find("{min: 90, max: 90}"), 18, "[80, 86]");
  Manifest m = read_manifest(write(text));
  EXPECT_TRUE(m.matches_sm(86));
  EXPECT_FALSE(m.matches_sm(89));
  EXPECT_EQ(m.sm_text(), "SM 80, 86");
}

TEST_F(ManifestTest, invalid_yaml_names_the_line) {
  std::string e = error_of("schema: 1\nname: [unclosed\n");
  EXPECT_NE(e.find("m.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid YAML"), std::string::npos) << e;
}

TEST_F(ManifestTest, unknown_field_names_the_field_and_its_line) {
  std::string text = kValid;
  text += "colour: blue\n";
  std::string e = error_of(text);
  EXPECT_NE(e.find("m.yaml:12: unknown field 'colour'"), std::string::npos) << e;
}

TEST_F(ManifestTest, unknown_dtype_names_the_field) {
  std::string text = kValid;
  text.replace(text.find("bf16, f16"), 9, "bf17");
  std::string e = error_of(text);
  EXPECT_NE(e.find("m.yaml:11: field 'ops[0].dtypes': unknown dtype 'bf17'"), std::string::npos) << e;
}

TEST_F(ManifestTest, unknown_op_is_refused) {
  std::string text = kValid;
  text.replace(text.find("name: matmul,"), 13, "name: convolve,");
  std::string e = error_of(text);
  EXPECT_NE(e.find("unknown op 'convolve'"), std::string::npos) << e;
}

TEST_F(ManifestTest, missing_field_is_named) {
  std::string text = kValid;
  text.erase(text.find("priority: 100\n"), 14);
  std::string e = error_of(text);
  EXPECT_NE(e.find("missing required field 'priority'"), std::string::npos) << e;
}

TEST_F(ManifestTest, cuda_manifest_needs_an_sm_range_and_cpu_may_not_have_one) {
  std::string text = kValid;
  text.erase(text.find("sm: {min: 90, max: 90}\n"), 23);
  EXPECT_NE(error_of(text).find("missing required field 'sm'"), std::string::npos);
  text = kValid;
  text.replace(text.find("device: cuda"), 12, "device: cpu");
  EXPECT_NE(error_of(text).find("only a cuda plugin has an SM range"), std::string::npos);
}

TEST_F(ManifestTest, inverted_sm_range_and_bad_integers_are_refused) {
  std::string text = kValid;
  text.replace(text.find("{min: 90, max: 90}"), 18, "{min: 90, max: 80}");
  EXPECT_NE(error_of(text).find("min 90 is above max 80"), std::string::npos);
  text = kValid;
  text.replace(text.find("priority: 100"), 13, "priority: high");
  EXPECT_NE(error_of(text).find("'high' is not an integer"), std::string::npos);
}

TEST_F(ManifestTest, schema_version_and_abi_format_are_checked) {
  std::string text = kValid;
  text.replace(text.find("schema: 1"), 9, "schema: 2");
  EXPECT_NE(error_of(text).find("schema 2 is not supported"), std::string::npos);
  text = kValid;
  text.replace(text.find("\"1.0\""), 5, "one");
  EXPECT_NE(error_of(text).find("not a MAJOR.MINOR version"), std::string::npos);
}

TEST_F(ManifestTest, abi_versions_outside_major_dot_minor_are_refused) {
  for (const char* bad : {"65537.0", "1abc", "+1.0", "-1.0", "1.", ".1", "1.0.0", "1.70000", ""}) {
    std::string text = kValid;
    text.replace(text.find("\"1.0\""), 5, std::string("\"") + bad + "\"");
    EXPECT_NE(error_of(text).find("is not a MAJOR.MINOR version"), std::string::npos) << bad;
  }
  std::string text = kValid;
  text.replace(text.find("\"1.0\""), 5, "\"1\"");
  EXPECT_EQ(read_manifest(write(text)).plugin_abi, GK_MAKE_VERSION(1, 0));
  text = kValid;
  text.replace(text.find("\"1.0\""), 5, "\"65535.65535\"");
  EXPECT_EQ(read_manifest(write(text)).plugin_abi, GK_MAKE_VERSION(65535, 65535));
}

TEST_F(ManifestTest, a_field_given_twice_is_refused) {
  std::string text = std::string(kValid) + "library: /elsewhere/libevil.so\n";
  EXPECT_NE(error_of(text).find(":12: field 'library' is given twice"), std::string::npos)
      << error_of(text);
  text = kValid;
  text.replace(text.find("{min: 90, max: 90}"), 18, "{min: 90, max: 90, min: 80}");
  EXPECT_NE(error_of(text).find("field 'sm.min' is given twice"), std::string::npos)
      << error_of(text);
  text = kValid;
  text.replace(text.find("dtypes: [bf16, f16]"), 19, "dtypes: [bf16], dtypes: [f32]");
  EXPECT_NE(error_of(text).find("field 'ops[0].dtypes' is given twice"), std::string::npos)
      << error_of(text);
}

TEST_F(ManifestTest, a_second_yaml_document_is_refused) {
  std::string text = std::string(kValid) + "---\nname: other\n";
  EXPECT_NE(error_of(text).find("a second YAML document"), std::string::npos) << error_of(text);
}

TEST_F(ManifestTest, malformed_text_that_never_ended_yaml_cpp_load_all_is_refused) {
  EXPECT_FALSE(error_of("- a: 1\n, name: x\n").empty());
  // A leading document marker and comments are fine; a trailing end marker is a second one.
  std::string text = std::string("# comment\n---\n") + kValid;
  EXPECT_EQ(read_manifest(write(text)).name, "matmul_sm90");
  EXPECT_NE(error_of(std::string(kValid) + "...\n").find(":12: a second YAML document"),
            std::string::npos);
}

TEST_F(ManifestTest, an_oversized_manifest_is_refused_before_parsing) {
  std::string text = std::string(kValid) + "# " + std::string(kMaxManifestBytes, 'x') + "\n";
  EXPECT_NE(error_of(text).find("a manifest is at most"), std::string::npos);
}

TEST_F(ManifestTest, requires_lists_library_file_names_without_a_folder) {
  Manifest m =
      read_manifest(write(std::string(kValid) + "requires: [libcufft.so.12, libcublasLt.so.13]\n"));
  EXPECT_EQ(m.requires_libraries,
            (std::vector<std::string>{"libcufft.so.12", "libcublasLt.so.13"}));
  EXPECT_TRUE(read_manifest(write(kValid)).requires_libraries.empty());
  std::string e = error_of(std::string(kValid) + "requires: [/usr/lib/libcufft.so.12]\n");
  EXPECT_NE(e.find("field 'requires[0]'"), std::string::npos) << e;
  EXPECT_NE(e.find("without a folder"), std::string::npos) << e;
  e = error_of(std::string(kValid) + "requires: []\n");
  EXPECT_NE(e.find("field 'requires'"), std::string::npos) << e;
  e = error_of(std::string(kValid) + "requires: libcufft.so.12\n");
  EXPECT_NE(e.find("non-empty list"), std::string::npos) << e;
}

TEST_F(ManifestTest, top_level_must_be_a_mapping) {
  EXPECT_NE(error_of("- a\n- b\n").find("expected a YAML mapping"), std::string::npos);
}

}  // namespace
}  // namespace gk
