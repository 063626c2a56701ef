# SDK round trip, run by ctest (cmake -P):
#   1. cmake --install the GPUkit build into a fresh prefix
#   2. configure + build examples/third_party_plugin against it (find_package(gpukit))
#   3. run CHECKER (acme_relu serves relu) and MODEL_CHECKER (acme_tiny_lm serves a model
#      through gk_model_load) with GPUKIT_PLUGIN_PATH=<plugin build>/manifests
#   4. compile examples/c/hello.c against the prefix with pkg-config and run it there
# Inputs (-D): GPUKIT_BUILD_DIR, WORK_DIR, EXAMPLE_SOURCE, HELLO_SOURCE, CHECKER,
#              MODEL_CHECKER, GENERATOR, C_COMPILER, LIBDIR.
cmake_minimum_required(VERSION 3.25)

foreach(var GPUKIT_BUILD_DIR WORK_DIR EXAMPLE_SOURCE HELLO_SOURCE CHECKER MODEL_CHECKER
            GENERATOR C_COMPILER LIBDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_sdk_test.cmake: -D${var}=… is required")
  endif()
endforeach()

function(step title)
  cmake_parse_arguments(ARG "" "" "COMMAND" ${ARGN})
  message(STATUS "sdk: ${title}")
  execute_process(COMMAND ${ARG_COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sdk: ${title} failed (${rc}):\n${out}")
  endif()
  message("${out}")
endfunction()

set(prefix ${WORK_DIR}/prefix)
set(plugin_build ${WORK_DIR}/acme_relu-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

step("install the SDK into ${prefix}"
  COMMAND ${CMAKE_COMMAND} --install ${GPUKIT_BUILD_DIR} --prefix ${prefix})
foreach(f include/gpukit/gpukit.h include/gpukit/gpukit_plugin.h include/gpukit/gpukit_dlpack.h
          include/gpukit/gpukit_audio.h include/gpukit/gpukit_runtime.h include/gpukit/gpukit_model.h
          ${LIBDIR}/cmake/gpukit/gpukitConfig.cmake
          ${LIBDIR}/cmake/gpukit/gpukitConfigVersion.cmake
          ${LIBDIR}/cmake/gpukit/GpukitPlugin.cmake ${LIBDIR}/pkgconfig/gpukit.pc
          ${LIBDIR}/libgpukit.so ${LIBDIR}/gpukit/manifests/cpu.yaml)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "sdk: the install tree lacks ${f}")
  endif()
endforeach()

step("configure the out-of-tree plugin"
  COMMAND ${CMAKE_COMMAND} -S ${EXAMPLE_SOURCE} -B ${plugin_build} -G ${GENERATOR}
          -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${C_COMPILER}
          -DCMAKE_BUILD_TYPE=RelWithDebInfo)
step("build the out-of-tree plugin" COMMAND ${CMAKE_COMMAND} --build ${plugin_build})
foreach(f manifests/acme_relu.yaml plugins/libgpukit_acme_relu.so manifests/acme_tiny_lm.yaml
          plugins/libgpukit_acme_tiny_lm.so)
  if(NOT EXISTS ${plugin_build}/${f})
    message(FATAL_ERROR "sdk: the plugin build lacks ${f}")
  endif()
endforeach()

step("acme_relu serves relu (GPUKIT_PLUGIN_PATH=${plugin_build}/manifests)"
  COMMAND ${CMAKE_COMMAND} -E env GPUKIT_PLUGIN_PATH=${plugin_build}/manifests
          GPUKIT_PLUGINS_DISABLE= ${CHECKER})
file(MAKE_DIRECTORY ${WORK_DIR}/tiny_model)
step("acme_tiny_lm serves AcmeTinyLM through gk_model_load"
  COMMAND ${CMAKE_COMMAND} -E env GPUKIT_PLUGIN_PATH=${plugin_build}/manifests
          GPUKIT_PLUGINS_DISABLE= GPUKIT_DEVICE=cpu ${MODEL_CHECKER} ${WORK_DIR}/tiny_model)

# pkg-config: compile the README's hello.c against the installed prefix and run it there;
# the installed libgpukit finds the installed manifests beside itself.
find_program(PKG_CONFIG pkg-config)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
  execute_process(COMMAND ${PKG_CONFIG} --cflags --libs gpukit RESULT_VARIABLE rc
                  OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "sdk: pkg-config --cflags --libs gpukit failed")
  endif()
  message(STATUS "sdk: pkg-config gpukit: ${flags}")
  separate_arguments(flags UNIX_COMMAND "${flags}")
  step("compile hello.c with pkg-config"
    COMMAND ${C_COMPILER} -std=c99 -Wall -Wextra -o ${WORK_DIR}/hello ${HELLO_SOURCE} ${flags})
  # No LD_LIBRARY_PATH: the rpath that pkg-config's Libs carry must find libgpukit.
  step("run hello against the install tree"
    COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH GPUKIT_PLUGIN_PATH= GPUKIT_DEVICE=cpu
            ${WORK_DIR}/hello)
else()
  message(STATUS "sdk: pkg-config not found, pkg-config step skipped")
endif()
message(STATUS "sdk: all steps passed")
