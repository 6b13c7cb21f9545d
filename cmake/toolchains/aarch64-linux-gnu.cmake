# Cross-compiles Cohort for 64-bit Arm Linux with Debian's cross compiler
# (gcc-aarch64-linux-gnu) against the :arm64 -dev packages installed beside
# the host's (multiarch). scripts/cross-test aarch64 uses it:
#   cmake -S . -B build-aarch64 \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)

# Debian's multiarch libraries live in the host's own tree, so the root is
# /, and pkg-config must read only the arm64 .pc files (with the host's
# PKG_CONFIG_PATH cleared, or x86-64 flags would leak in). ENV{} set here
# holds in every try_compile as well: CMake re-reads this file there.
set(ENV{PKG_CONFIG_LIBDIR}
  /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

# Programs found at configure time are the build machine's: protoc-c
# generates the protobuf-c sources natively. Libraries and headers are
# looked for in the arm64 tree only.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# ctest runs the test programs through qemu-user, which must use the
# multiarch libc6:arm64's loader (QEMU_LD_PREFIX unset or /; see
# scripts/cross-test).
find_program(COHORT_QEMU_AARCH64 qemu-aarch64)
if(COHORT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${COHORT_QEMU_AARCH64})
endif()
