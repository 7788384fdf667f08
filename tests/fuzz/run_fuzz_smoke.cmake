# One fuzz smoke test: copies the seed corpus into the build tree (libFuzzer adds what it finds to
# the first corpus folder it is given, and the source tree stays untouched), then fuzzes for
# SECONDS. A crash, a sanitizer report, a hang or an allocation far beyond a small input fails it,
# leaving the input that did it in WORK_DIR/findings.
# cmake -DHARNESS=... -DSEED_CORPUS=... -DWORK_DIR=... -DSECONDS=... -P run_fuzz_smoke.cmake
foreach(variable HARNESS SEED_CORPUS WORK_DIR SECONDS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "run_fuzz_smoke.cmake needs -D${variable}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK_DIR}/corpus)
file(MAKE_DIRECTORY ${WORK_DIR}/findings)
file(COPY ${SEED_CORPUS}/ DESTINATION ${WORK_DIR}/corpus)
# -timeout: an input that takes 10 s is a hang; -malloc_limit_mb: inputs are a few KiB, so an
# allocation of 64 MiB follows a size the file claims but does not have.
execute_process(COMMAND ${HARNESS} -max_total_time=${SECONDS} -timeout=10 -malloc_limit_mb=64 -print_final_stats=1
                        -artifact_prefix=${WORK_DIR}/findings/ ${WORK_DIR}/corpus
                RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${HARNESS} failed (${status}); the input is in ${WORK_DIR}/findings")
endif()
