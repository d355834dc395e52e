# The project's options, the pre-0.2 option names they replace, and the CUDA decision.
#
# Every option is KVCANARY_*. The KVC_* names of 0.1 still work for this release: given on the
# command line (-DKVC_ENABLE_CUDA=OFF), each sets its new option once, with a deprecation note,
# and leaves the cache.

# kvc_legacy_option(OLD NEW TYPE): moves a cached OLD value into NEW (converted for NEW's type).
function(kvc_legacy_option old new type)
  if(NOT DEFINED CACHE{${old}})
    return()
  endif()
  set(value "${${old}}")
  if(new STREQUAL "KVCANARY_CUDA")
    # KVC_ENABLE_CUDA was a boolean; KVCANARY_CUDA takes AUTO|ON|OFF.
    if(value)
      set(value ON)
    else()
      set(value OFF)
    endif()
  endif()
  message(DEPRECATION "kvcanary: ${old} is now ${new} (${old}=${${old}} taken as ${new}=${value}); "
                      "${old} will be removed in the next release")
  set(${new} "${value}" CACHE ${type} "" FORCE)
  unset(${old} CACHE)
endfunction()

kvc_legacy_option(KVC_BUILD_TESTS KVCANARY_BUILD_TESTS BOOL)
kvc_legacy_option(KVC_BUILD_CLI KVCANARY_BUILD_CLI BOOL)
kvc_legacy_option(KVC_BUILD_PYTHON KVCANARY_BUILD_PYTHON BOOL)
kvc_legacy_option(KVC_SANITIZE KVCANARY_SANITIZE BOOL)
kvc_legacy_option(KVC_BUILD_FUZZ KVCANARY_BUILD_FUZZ BOOL)
kvc_legacy_option(KVC_ENABLE_CUDA KVCANARY_CUDA STRING)

# Tests, the command and the bench are the developer's build: on by default only when kvcanary is
# the top-level project, off when an engine adds it with add_subdirectory or FetchContent.
option(KVCANARY_BUILD_TESTS "Build the GoogleTest suites and register the ctest tests"
       ${PROJECT_IS_TOP_LEVEL})
option(KVCANARY_BUILD_CLI "Build the kvcanary command (sim, and bench with KVCANARY_BUILD_BENCH)"
       ${PROJECT_IS_TOP_LEVEL})
option(KVCANARY_BUILD_BENCH "Build the op benchmark (kvcanary bench)" ${PROJECT_IS_TOP_LEVEL})
option(KVCANARY_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
# libFuzzer targets (tests/fuzz/, docs/fuzzing.md): clang only, with KVCANARY_SANITIZE on so that a
# wrongly accepted call shows up as an ASan or UBSan report (the `fuzz` preset).
option(KVCANARY_BUILD_FUZZ "Build the libFuzzer targets of tests/fuzz (clang only)" OFF)
# OFF for users (a newer compiler's new warning must not break their build); ON in the presets
# that CI and developers use.
option(KVCANARY_WERROR "Treat compiler warnings as errors" OFF)
option(KVCANARY_INSTALL "Generate the install rules and the package files" ${PROJECT_IS_TOP_LEVEL})

# CUDA: AUTO builds the CUDA backend when a CUDA compiler is found (the default), ON requires it,
# OFF never looks. KVCANARY_WITH_CUDA is the decision the rest of the build reads.
set(KVCANARY_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE KVCANARY_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${KVCANARY_CUDA}" _kvc_cuda)
if(NOT _kvc_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "kvcanary: KVCANARY_CUDA must be AUTO, ON or OFF, got '${KVCANARY_CUDA}'")
endif()
set(KVCANARY_WITH_CUDA OFF)
if(NOT _kvc_cuda STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(KVCANARY_WITH_CUDA ON)
  elseif(_kvc_cuda STREQUAL "ON")
    message(FATAL_ERROR "kvcanary: KVCANARY_CUDA=ON needs a CUDA compiler, none found "
                        "(put nvcc on PATH or set CMAKE_CUDA_COMPILER)")
  endif()
endif()
set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures to build for")

foreach(_kvc_option KVCANARY_BUILD_TESTS KVCANARY_BUILD_CLI KVCANARY_BUILD_BENCH KVCANARY_SANITIZE
                    KVCANARY_BUILD_FUZZ KVCANARY_WERROR KVCANARY_INSTALL)
  message(STATUS "kvcanary: ${_kvc_option}=${${_kvc_option}}")
endforeach()
message(STATUS "kvcanary: KVCANARY_CUDA=${KVCANARY_CUDA} -> ${KVCANARY_WITH_CUDA} "
               "(compiler: ${CMAKE_CUDA_COMPILER})")
