# kvc_library(TARGET EXPORT_NAME SOURCES...): one layer of the installed library.
#
# STATIC or SHARED as BUILD_SHARED_LIBS says (static by default). The layer sees the public
# headers (include/, and the generated version.h in the build tree; also its users') and the
# private ones (src/). It is exported as kvcanary::EXPORT_NAME, and the same alias exists in the
# build, so a project that adds kvcanary with add_subdirectory links the same names.
function(kvc_library target export_name)
  add_library(${target} ${ARGN})
  add_library(kvcanary::${export_name} ALIAS ${target})
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
           $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>
           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  # Warnings and sanitizers are the project's own: not part of what an installed target exports.
  target_link_libraries(${target} PRIVATE $<BUILD_INTERFACE:kvc_build_flags>)
  set_target_properties(${target} PROPERTIES
    EXPORT_NAME ${export_name}
    VERSION ${PROJECT_VERSION}
    SOVERSION ${KVCANARY_SOVERSION})
  if(BUILD_SHARED_LIBS AND NOT APPLE)
    # Installed shared layers sit in one directory and find each other there, in any prefix.
    set_target_properties(${target} PROPERTIES INSTALL_RPATH "$ORIGIN")
  endif()
  set_property(GLOBAL APPEND PROPERTY KVCANARY_LIBRARY_TARGETS ${target})
endfunction()

# The CUDA runtime the layers link: the static one into static libraries (one copy, in the final
# executable), the shared one when the layers are shared libraries (no copy per .so).
if(BUILD_SHARED_LIBS)
  set(KVCANARY_CUDART CUDA::cudart)
else()
  set(KVCANARY_CUDART CUDA::cudart_static)
endif()

# kvc_cuda_flags(TARGET): the project's flags for a target's .cu sources: C++20 and the host
# compiler's warnings (errors with KVCANARY_WERROR). CMake 3.25 cannot name the C++20 dialect for
# nvcc 13: the dialect property decays to one it knows and -std=c++20 is passed directly.
function(kvc_cuda_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Xcompiler=-Wall,-Wextra>)
  if(KVCANARY_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--Werror all-warnings>)
  endif()
  set_target_properties(${target} PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED OFF)
endfunction()
