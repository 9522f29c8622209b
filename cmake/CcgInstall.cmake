# cmake --install: the shared library, public headers, the ccgraph tool, a
# CMake package (find_package(ccgraph) -> ccgraph::ccgraph) and a pkg-config
# file.
include(CMakePackageConfigHelpers)

install(TARGETS ccgraph EXPORT ccgraphTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ccgraph_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The CUDA kernels' module, loaded from the library's own directory when a
# GPU is first asked for (src/exec/cuda/module.h).
if(TARGET ccgraph_cuda)
  install(TARGETS ccgraph_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY include/ccgraph DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(CCG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ccgraph)
install(EXPORT ccgraphTargets NAMESPACE ccgraph:: DESTINATION ${CCG_CMAKE_DIR})
configure_package_config_file(cmake/ccgraphConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ccgraphConfig.cmake INSTALL_DESTINATION ${CCG_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ccgraphConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ccgraphConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/ccgraphConfigVersion.cmake DESTINATION ${CCG_CMAKE_DIR})

file(RELATIVE_PATH CCG_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(cmake/ccgraph.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ccgraph.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ccgraph.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
