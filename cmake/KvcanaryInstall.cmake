# Install rules and packages: the public headers (with the generated version.h), the library
# layers exported as kvcanary::*, the CMake package (kvcanaryConfig.cmake, its version file), the
# pkg-config file, the kvcanary command when built, the docs; and CPack (DEB, TGZ).
include(CMakePackageConfigHelpers)

set(KVCANARY_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kvcanary)
get_property(_kvc_libraries GLOBAL PROPERTY KVCANARY_LIBRARY_TARGETS)

install(TARGETS ${_kvc_libraries} EXPORT kvcanaryTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/kvcanary DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/kvcanary/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvcanary)
install(EXPORT kvcanaryTargets NAMESPACE kvcanary:: DESTINATION ${KVCANARY_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kvcanaryConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kvcanaryConfig.cmake
  INSTALL_DESTINATION ${KVCANARY_CMAKE_DIR})
# 0.x: a minor release may change the API, so only the same MAJOR.MINOR satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kvcanaryConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kvcanaryConfig.cmake
              ${PROJECT_BINARY_DIR}/kvcanaryConfigVersion.cmake
  DESTINATION ${KVCANARY_CMAKE_DIR})

# pkg-config: the same link line as kvcanary::runtime. Every layer is in Libs (a user calls the
# core's TensorView directly); the dependencies too with static libraries (the default), in
# Libs.private with shared ones.
file(RELATIVE_PATH KVC_PC_RELATIVE_PREFIX "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
set(KVC_PC_CFLAGS "")
set(_kvc_pc_layers "")
set(_kvc_pc_deps "")
if(KVCANARY_WITH_CUDA)
  string(APPEND KVC_PC_CFLAGS " -DKVC_HAVE_CUDA -I${CUDAToolkit_INCLUDE_DIRS}")
  string(APPEND _kvc_pc_layers " -lkvcanary_cuda")
  if(BUILD_SHARED_LIBS)
    string(APPEND _kvc_pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
  else()
    string(APPEND _kvc_pc_deps " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -ldl -lrt")
  endif()
endif()
if(KVCANARY_WITH_CUDA AND KVC_NCCL_INCLUDE_DIR AND KVC_NCCL_LIBRARY)
  string(APPEND _kvc_pc_deps " ${KVC_NCCL_LIBRARY}")  # the runtime's all-reduced violation signal
endif()
string(APPEND _kvc_pc_layers " -lkvcanary_cpu -lkvcanary_core")
if(OpenMP_CXX_FOUND)
  string(APPEND KVC_PC_CFLAGS " ${OpenMP_CXX_FLAGS}")
  string(APPEND _kvc_pc_deps " ${OpenMP_CXX_FLAGS}")
endif()
if(BUILD_SHARED_LIBS)
  set(KVC_PC_LIBS "${_kvc_pc_layers}")
  set(KVC_PC_LIBS_PRIVATE "${_kvc_pc_deps}")
else()
  set(KVC_PC_LIBS "${_kvc_pc_layers}${_kvc_pc_deps}")
  set(KVC_PC_LIBS_PRIVATE "")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/kvcanary.pc.in ${PROJECT_BINARY_DIR}/kvcanary.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kvcanary.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET kvcanary_cli)
  if(BUILD_SHARED_LIBS AND NOT APPLE)
    file(RELATIVE_PATH _kvc_bin_to_lib "/root/${CMAKE_INSTALL_BINDIR}" "/root/${CMAKE_INSTALL_LIBDIR}")
    set_target_properties(kvcanary_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_kvc_bin_to_lib}")
  endif()
  install(TARGETS kvcanary_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CHANGELOG.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
  FILES_MATCHING PATTERN "*.md")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples DESTINATION ${CMAKE_INSTALL_DOCDIR})

# cpack -G DEB / -G TGZ (from the build directory).
set(CPACK_PACKAGE_NAME kvcanary)
set(CPACK_PACKAGE_VENDOR kvcanary)
set(CPACK_PACKAGE_CONTACT "kvcanary maintainers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "KV-cache canaries for LLM inference engines: ops, host runtime, kvcanary command")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "TGZ;DEB")
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
# The kvcanary command and shared libraries: their run-time dependencies from dpkg-shlibdeps.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(OpenMP_CXX_FOUND AND NOT BUILD_SHARED_LIBS AND NOT TARGET kvcanary_cli)
  # Static libraries carry no dependency of their own, but whoever links them needs libgomp
  # (dpkg-shlibdeps finds it through the kvcanary command when that is packaged).
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libgomp1")
endif()
include(CPack)

# ctest: this build tree installed into a temporary prefix, and the example built against it
# (scripts/check_install.sh --reuse; the add_subdirectory consumer runs in the script's full mode).
# Not under the sanitizers: the example would have to link them too.
if(KVCANARY_BUILD_TESTS AND NOT KVCANARY_SANITIZE)
  add_test(NAME install_consumer
    COMMAND bash ${PROJECT_SOURCE_DIR}/scripts/check_install.sh --reuse ${PROJECT_BINARY_DIR})
  set_tests_properties(install_consumer PROPERTIES
    ENVIRONMENT "CXX=${CMAKE_CXX_COMPILER}" TIMEOUT 600)
endif()
