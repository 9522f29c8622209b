# Compiler flags and the AUTO/ON/OFF optional dependencies.

set(CCG_SANITIZE_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)

# Warnings (and -Werror with CCG_WERROR) for our own sources.
function(ccg_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
    -Wmissing-prototypes -Wno-missing-field-initializers -Wvla)
  if(CCG_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  ccg_target_sanitize(${target})
endfunction()

function(ccg_target_sanitize target)
  if(CCG_SANITIZE)
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      target_compile_options(${target} PRIVATE ${CCG_SANITIZE_FLAGS})
    endif()
    if(NOT type STREQUAL "OBJECT_LIBRARY" AND NOT type STREQUAL "INTERFACE_LIBRARY")
      target_link_options(${target} PRIVATE ${CCG_SANITIZE_FLAGS})
    endif()
  endif()
endfunction()

# AUTO builds a part when its dependencies are found; ON fails without them.
macro(ccg_resolve_optional_deps)
  set(CCG_HAVE_MPI OFF)
  if(NOT CCG_WITH_MPI STREQUAL "OFF")
    find_package(MPI COMPONENTS C QUIET)
    if(MPI_C_FOUND)
      set(CCG_HAVE_MPI ON)
    elseif(CCG_WITH_MPI STREQUAL "ON")
      message(FATAL_ERROR "CCG_WITH_MPI=ON but no MPI C library was found (install libopenmpi-dev)")
    endif()
  endif()

  set(CCG_HAVE_CUDA OFF)
  # The fuzzing build (clang, -fsanitize=fuzzer) leaves the GPU path out:
  # its link cannot go through nvcc's host linker.
  if(NOT CCG_WITH_CUDA STREQUAL "OFF" AND NOT CCG_FUZZ)
    find_package(CUDAToolkit QUIET)
    find_library(CCG_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64 /usr/lib/x86_64-linux-gnu)
    find_path(CCG_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include /usr/include)
    if(CUDAToolkit_FOUND AND TARGET CUDA::cublas AND CCG_NCCL_LIBRARY AND CCG_NCCL_INCLUDE_DIR)
      set(CCG_HAVE_CUDA ON)
    elseif(CCG_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR "CCG_WITH_CUDA=ON but the CUDA toolkit, cuBLAS or NCCL was not found")
    endif()
  endif()
endmacro()
