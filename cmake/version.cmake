# Writes stackhouse's package version file with CMake's own helper:
#   cmake -DVERSION=0.1.0 -DOUT=.../stackhouseConfigVersion.cmake -P cmake/version.cmake
# SameMajorVersion, as the .so name: libstackhouse.so.MAJOR.
include(CMakePackageConfigHelpers)
if(NOT VERSION OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DVERSION=X.Y.Z -DOUT=FILE -P version.cmake")
endif()
write_basic_package_version_file("${OUT}" VERSION "${VERSION}" COMPATIBILITY SameMajorVersion)
