# Installing rlx (`cmake --install BUILD --prefix P`) and packaging it (`make package`):
# the public headers, librlx and librlx_onnx (shared, with a SONAME, unless RLX_SHARED=OFF),
# the downstream packages under libs/ (static), the `rlx` CLI, a CMake package
# (find_package(rlx CONFIG): rlx::rlx, rlx::onnx, rlx::sparse, rlx::linalg, rlx::dist,
# rlx::llm) and pkg-config files. Included at the end of CMakeLists.txt, once every target
# exists; the targets' own CMakeLists.txt know nothing of installing.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RLX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)
# The ABI may change with every minor version before 1.0: the SONAME carries MAJOR.MINOR.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(RLX_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(RLX_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

set(RLX_EXPORTED rlx rlx_onnx)
set(RLX_PACKAGE_LIBS rlx_sparse rlx_linalg rlx_dist rlx_llm)
foreach(t IN LISTS RLX_PACKAGE_LIBS)
  if(TARGET ${t})  # rlx_dist needs MPI
    list(APPEND RLX_EXPORTED ${t})
  endif()
endforeach()
set_target_properties(rlx PROPERTIES EXPORT_NAME rlx)
set_target_properties(rlx_onnx PROPERTIES EXPORT_NAME onnx)
foreach(t IN LISTS RLX_EXPORTED)
  string(REGEX REPLACE "^rlx_" "" name ${t})
  if(NOT t STREQUAL "rlx")
    set_target_properties(${t} PROPERTIES EXPORT_NAME ${name})
  endif()
endforeach()

if(RLX_SHARED)
  # No -Drlx_EXPORTS: the objects compile exactly as they did for the static library
  # (PIC already, for the Python module), so ccache keeps serving them.
  set_target_properties(rlx rlx_onnx PROPERTIES
    VERSION ${PROJECT_VERSION} SOVERSION ${RLX_SOVERSION} DEFINE_SYMBOL ""
    # Installed next to each other; OpenBLAS's OpenMP build and the CUDA toolkit's
    # libraries stay where they were linked from (INSTALL_RPATH_USE_LINK_PATH), as in the
    # build tree.
    INSTALL_RPATH "\$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
endif()
set_target_properties(rlx-cli PROPERTIES
  INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR}" INSTALL_RPATH_USE_LINK_PATH ON)

# The packages under libs/ give their build-tree include dirs (they are written as
# out-of-tree packages would be); installed, their headers are under include/.
foreach(t IN LISTS RLX_EXPORTED)
  get_target_property(dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    list(TRANSFORM dirs REPLACE "^(${PROJECT_SOURCE_DIR}/.*)$" "$<BUILD_INTERFACE:\\1>")
    set_target_properties(${t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
  endif()
  # A static library passes its private link libraries on ($<LINK_ONLY:...>); rlx_warnings
  # holds warning flags only, nothing to link, and is not installed.
  get_target_property(libs ${t} INTERFACE_LINK_LIBRARIES)
  if(libs)
    list(REMOVE_ITEM libs "$<LINK_ONLY:rlx_warnings>")
    set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}")
  endif()
endforeach()

install(TARGETS ${RLX_EXPORTED} EXPORT rlxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS rlx-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.cuh")
foreach(t IN LISTS RLX_PACKAGE_LIBS)
  string(REGEX REPLACE "^rlx_" "" name ${t})
  if(TARGET ${t})
    install(DIRECTORY libs/${name}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
      FILES_MATCHING PATTERN "*.h")
  endif()
endforeach()
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${RLX_INSTALL_CMAKEDIR})

# What rlxConfig.cmake finds again for the exported link interfaces: the configuration
# this build made, in variables the template reads.
set(RLX_CONFIG_HAS_DNNL ${dnnl_FOUND})
set(RLX_CONFIG_HAS_DIST OFF)
if(TARGET rlx_dist)
  set(RLX_CONFIG_HAS_DIST ON)
endif()
set(RLX_CONFIG_LAPACK OFF)
if(TARGET rlx_linalg)  # LAPACK::LAPACK when OpenBLAS does not export LAPACK's symbols
  get_target_property(libs rlx_linalg LINK_LIBRARIES)
  if("LAPACK::LAPACK" IN_LIST libs)
    set(RLX_CONFIG_LAPACK ON)
  endif()
endif()
set(RLX_CONFIG_CUDA_ROOT "")
if(RLX_HAS_CUDA)
  get_filename_component(RLX_CONFIG_CUDA_ROOT "${CUDAToolkit_BIN_DIR}" DIRECTORY)
endif()
configure_package_config_file(cmake/rlxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/rlxConfig.cmake INSTALL_DESTINATION ${RLX_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/rlxConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/rlxConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/rlxConfigVersion.cmake DESTINATION ${RLX_INSTALL_CMAKEDIR})

# pkg-config: rlx (the core) and rlx-onnx (the importer), relocatable (${pcfiledir}).
set(RLX_PC_CFLAGS "")
foreach(d RLX_HAVE_CUDA RLX_HAVE_CUDNN)
  get_target_property(defs rlx INTERFACE_COMPILE_DEFINITIONS)
  if("${d}=1" IN_LIST defs)
    string(APPEND RLX_PC_CFLAGS " -D${d}=1")
  endif()
endforeach()
set(RLX_PC_LIBS_PRIVATE "")
if(NOT RLX_SHARED)  # a static librlx: its own link dependencies (without oneDNN's, CUDA's)
  set(RLX_PC_LIBS_PRIVATE "-fopenmp ${RLX_BLAS}")
endif()
configure_file(cmake/rlx.pc.in ${PROJECT_BINARY_DIR}/cmake/rlx.pc @ONLY)
configure_file(cmake/rlx-onnx.pc.in ${PROJECT_BINARY_DIR}/cmake/rlx-onnx.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/rlx.pc ${PROJECT_BINARY_DIR}/cmake/rlx-onnx.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package's compiled part for setup.py (`pip wheel .`, `pip install .`):
# `cmake --install BUILD --component python --prefix STAGE` puts the module and the shared
# libraries it loads in STAGE/rlx, the module finding them beside itself ($ORIGIN). Not
# part of a plain install.
if(TARGET rlx_python_module)
  set_target_properties(rlx_python_module PROPERTIES
    INSTALL_RPATH "\$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS rlx_python_module LIBRARY DESTINATION rlx COMPONENT python EXCLUDE_FROM_ALL)
  if(RLX_SHARED)
    install(TARGETS rlx rlx_onnx LIBRARY DESTINATION rlx NAMELINK_SKIP
      COMPONENT python EXCLUDE_FROM_ALL)
  endif()
endif()

# `make package`: everything a plain install holds as one Debian package for /usr,
# rlx_VERSION_ARCH.deb. dpkg-shlibdeps declares what the libraries and the CLI load; the
# CMake package's link interfaces need the development packages below as well (a static
# rlx::sparse links SuiteSparse, rlx::dist MPI, librlx's public interface OpenBLAS and
# oneDNN). The CUDA toolkit is NVIDIA's, not Debian's: a CUDA build needs it in
# /usr/local/cuda (dpkg-shlibdeps passes over its libraries).
find_program(RLX_DPKG dpkg)
set(RLX_DEB_ARCH amd64)
if(RLX_DPKG)
  execute_process(COMMAND ${RLX_DPKG} --print-architecture OUTPUT_VARIABLE RLX_DEB_ARCH
    OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
set(RLX_DEB_FILE rlx_${PROJECT_VERSION}_${RLX_DEB_ARCH}.deb)
set(RLX_DEB_DEPENDS libopenblas-openmp-dev libsuitesparse-dev)
if(dnnl_FOUND)
  list(APPEND RLX_DEB_DEPENDS libdnnl-dev)
endif()
if(RLX_CONFIG_HAS_DIST)
  list(APPEND RLX_DEB_DEPENDS libopenmpi-dev)
endif()
if(RLX_CONFIG_LAPACK)
  list(APPEND RLX_DEB_DEPENDS liblapack-dev)
endif()
if(NOT RLX_SHARED)
  list(APPEND RLX_DEB_DEPENDS nlohmann-json3-dev libonnx-dev libprotobuf-dev)
endif()
list(JOIN RLX_DEB_DEPENDS ", " RLX_DEB_DEPENDS)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rlx)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "rlx developers <rlx@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "ML compiler and runtime: C++ library, ONNX importer, the rlx command, CMake package")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME ${RLX_DEB_FILE})
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${RLX_DEB_ARCH})
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${RLX_DEB_DEPENDS}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
include(CPack)

if(RLX_BUILD_TESTS)
  add_subdirectory(tests/install)
endif()
