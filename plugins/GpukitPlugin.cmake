# gpukit_add_plugin(<name> SOURCES <files…> MANIFEST <manifest.yaml>)
#
# Builds plugin <name> as the shared library libgpukit_<name>.so, exporting only the
# gk_plugin_entry symbol (hidden visibility and a version script), and places it with its
# manifest where the runtime looks: <libdir>/gpukit/plugins and <libdir>/gpukit/manifests
# (build tree and install tree alike). Used in-tree and, through gpukitConfig.cmake, by
# out-of-tree plugins.
function(gpukit_add_plugin name)
  cmake_parse_arguments(ARG "" "MANIFEST" "SOURCES" ${ARGN})
  if(NOT ARG_MANIFEST)
    message(FATAL_ERROR "gpukit_add_plugin(${name}): MANIFEST is required")
  endif()
  set(target gpukit_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET gpukit_plugins)
    add_dependencies(gpukit_plugins ${target})
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME gpukit_${name}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TARGET gpukit::headers)
    target_link_libraries(${target} PRIVATE gpukit::headers)
  endif()
  if(DEFINED GPUKIT_OUT_PLUGINS)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${GPUKIT_OUT_PLUGINS})
    configure_file(${ARG_MANIFEST} ${GPUKIT_OUT_MANIFESTS}/${name}.yaml COPYONLY)
  else()
    # Out of tree: the build folder holds plugins/ and manifests/ side by side.
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/plugins)
    configure_file(${ARG_MANIFEST} ${CMAKE_BINARY_DIR}/manifests/${name}.yaml COPYONLY)
  endif()
  if(NOT APPLE)
    # Hidden visibility covers the plugin's own code, not what it links statically: where the
    # toolchain links libstdc++.a, its symbols would be exported and interpose between the
    # copies in one process (a crash in std::ostringstream). The version script exports the
    # entry point alone.
    set(version_script ${CMAKE_CURRENT_BINARY_DIR}/${target}.map)
    file(WRITE ${version_script} "{\n  global: gk_plugin_entry;\n  local: *;\n};\n")
    target_link_options(${target} PRIVATE -Wl,--no-undefined -Wl,-z,defs
                        -Wl,--version-script=${version_script})
    set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${version_script})
  endif()
  if(DEFINED GPUKIT_INSTALL_PLUGINDIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${GPUKIT_INSTALL_PLUGINDIR})
    install(FILES ${ARG_MANIFEST} DESTINATION ${GPUKIT_INSTALL_MANIFESTDIR} RENAME ${name}.yaml)
  endif()
endfunction()
