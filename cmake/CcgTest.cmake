# ccg_add_test(NAME name SOURCES a.c ... LABELS unit ... [LIBS ...] [ARGS ...])
# builds a cmocka test executable against the static library (so that tests
# reach private headers) and registers it with ctest under its labels.
# ccg_add_command_test(NAME name COMMAND ... LABELS ...) registers a command.
function(ccg_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LABELS;LIBS;ARGS;ENV" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "ccg_add_test(${T_NAME}): every test needs LABELS")
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ccgraph_static ${CMOCKA_LINK} ${T_LIBS})
  target_compile_definitions(${T_NAME} PRIVATE
    CCG_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
  ccg_target_warnings(${T_NAME})
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;${T_ENV}")
endfunction()

function(ccg_add_command_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "COMMAND;LABELS" ${ARGN})
  if(NOT T_LABELS)
    message(FATAL_ERROR "ccg_add_command_test(${T_NAME}): every test needs LABELS")
  endif()
  add_test(NAME ${T_NAME} COMMAND ${T_COMMAND})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
endfunction()
