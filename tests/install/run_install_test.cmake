# Run with `cmake -P` (tests/install/CMakeLists.txt passes the -D values): installs the tally
# build in TALLY_BINARY_DIR into WORK_DIR/prefix, then configures, builds and runs the outside
# project in CONSUMER_SOURCE_DIR against that prefix only. Fails on the first step that fails,
# printing that step's output.
cmake_minimum_required(VERSION 3.25)

foreach(required TALLY_BINARY_DIR TALLY_VERSION CONSUMER_SOURCE_DIR WORK_DIR GENERATOR)
  if(NOT DEFINED ${required} OR "${${required}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: pass -D${required}=...")
  endif()
endforeach()
if(NOT DEFINED TALLY_CONFIG OR TALLY_CONFIG STREQUAL "")
  set(TALLY_CONFIG Release)
endif()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Runs one step; on failure stops with the step's name, exit status and output.
function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "install test: ${name} failed (${status}):\n${ARGN}\n${output}")
  endif()
  message(STATUS "install test: ${name}: ok")
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

# (a) Install the build.
run_step("cmake --install" "${CMAKE_COMMAND}" --install "${TALLY_BINARY_DIR}" --prefix "${prefix}"
         --config "${TALLY_CONFIG}")
file(GLOB_RECURSE installed_configs "${prefix}/*/tallyConfig.cmake")
if(NOT installed_configs)
  message(FATAL_ERROR "install test: no tallyConfig.cmake under ${prefix}")
endif()
if(NOT EXISTS "${prefix}/include/tally/cpu.hpp")
  message(FATAL_ERROR "install test: ${prefix}/include/tally/cpu.hpp was not installed")
endif()
# The teaching lab (lab/, tally::lab) is not part of the installed library.
if(EXISTS "${prefix}/include/tally/lab.hpp")
  message(FATAL_ERROR "install test: ${prefix}/include/tally/lab.hpp was installed; the lab is not part of the library")
endif()

# (b) Configure the consumer against the prefix and nothing else: no package registry, no
# system tally.
set(configure_args
    -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${prefix}"
    "-DCMAKE_BUILD_TYPE=${TALLY_CONFIG}"
    "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"
    "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF"
    "-DTALLY_EXPECTED_PREFIX=${prefix}"
    "-DTALLY_EXPECTED_VERSION=${TALLY_VERSION}")
if(DEFINED MAKE_PROGRAM AND NOT MAKE_PROGRAM STREQUAL "")
  list(APPEND configure_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
endif()
if(DEFINED CXX_COMPILER AND NOT CXX_COMPILER STREQUAL "")
  list(APPEND configure_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(DEFINED CUDA_TOOLKIT_ROOT AND NOT CUDA_TOOLKIT_ROOT STREQUAL "")
  list(APPEND configure_args "-DCUDAToolkit_ROOT=${CUDA_TOOLKIT_ROOT}")
endif()
run_step("configure the consumer" "${CMAKE_COMMAND}" ${configure_args})

# (c) Build it.
run_step("build the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${TALLY_CONFIG}")

# (d) Run it (through its run_consumer target, which finds the binary for any generator); it
# exits non-zero on a wrong count or version, and prints the version it was built against.
run_step("run the consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${TALLY_CONFIG}"
         --target run_consumer)
string(FIND "${step_output}" "tally ${TALLY_VERSION}" version_at)
if(version_at EQUAL -1)
  message(FATAL_ERROR "install test: the consumer did not print 'tally ${TALLY_VERSION}':\n${step_output}")
endif()
message(STATUS "install test: passed\n${step_output}")
