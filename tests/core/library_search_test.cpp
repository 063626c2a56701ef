// White-box tests of the run-time library search (plugin/library_search.h): the order of the
// places searched, and the NVIDIA wheels' folders found beside libgpukit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "plugin/library_search.h"

namespace gk {
namespace {

namespace fs = std::filesystem;

class LibrarySearch : public ::testing::Test {
 protected:
  void SetUp() override {
    site_ = fs::temp_directory_path() / ("gk_library_search_" + std::to_string(::getpid()));
    fs::create_directories(site_ / "gpukit");
    fs::create_directories(site_ / "nvidia" / "cu13" / "lib");
    fs::create_directories(site_ / "nvidia" / "cufft" / "lib");
    fs::create_directories(site_ / "nvidia" / "no_lib_folder");
  }
  void TearDown() override {
    fs::remove_all(site_);
    unsetenv("GPUKIT_CUDA_LIBRARY_PATH");
    unsetenv("CUDA_HOME");
    unsetenv("CUDA_PATH");
  }
  fs::path site_;
};

TEST_F(LibrarySearch, override_then_wheels_then_toolkit_then_loader_then_usr_local_cuda) {
  setenv("GPUKIT_CUDA_LIBRARY_PATH", "/opt/a::/opt/b", 1);
  setenv("CUDA_HOME", "/opt/cuda-home", 1);
  setenv("CUDA_PATH", "/opt/cuda-home", 1);  // the same folder is listed once
  const auto places = library_search_places((site_ / "gpukit").string(), true);
  const std::vector<std::string> expected = {"/opt/a",
                                             "/opt/b",
                                             (site_ / "nvidia" / "cu13" / "lib").string(),
                                             (site_ / "nvidia" / "cufft" / "lib").string(),
                                             "/opt/cuda-home/lib64",
                                             "",  // the dynamic loader's own search
                                             "/usr/local/cuda/lib64"};
  EXPECT_EQ(places, expected);
}

TEST_F(LibrarySearch, without_the_environment_only_the_wheels_the_loader_and_usr_local_cuda) {
  setenv("GPUKIT_CUDA_LIBRARY_PATH", "/opt/a", 1);
  setenv("CUDA_HOME", "/opt/cuda-home", 1);
  const auto places = library_search_places((site_ / "gpukit").string(), false);
  const std::vector<std::string> expected = {(site_ / "nvidia" / "cu13" / "lib").string(),
                                             (site_ / "nvidia" / "cufft" / "lib").string(), "",
                                             "/usr/local/cuda/lib64"};
  EXPECT_EQ(places, expected);
}

TEST_F(LibrarySearch, a_name_with_a_folder_is_refused_and_a_missing_one_names_the_fix) {
  LibraryLookup bad = open_runtime_library("/tmp/libx.so");
  EXPECT_EQ(bad.handle, nullptr);
  EXPECT_NE(bad.why.find("not a library file name"), std::string::npos) << bad.why;
  LibraryLookup missing = open_runtime_library("libgpukit_search_test_absent.so.3");
  EXPECT_EQ(missing.handle, nullptr);
  EXPECT_NE(missing.why.find("libgpukit_search_test_absent.so.3 not found in"), std::string::npos)
      << missing.why;
  EXPECT_NE(missing.why.find("GPUKIT_CUDA_LIBRARY_PATH"), std::string::npos) << missing.why;
}

TEST_F(LibrarySearch, a_library_on_the_loaders_path_is_found) {
  LibraryLookup libm = open_runtime_library("libm.so.6");
  EXPECT_NE(libm.handle, nullptr) << libm.why;
}

}  // namespace
}  // namespace gk
