# Makes the installed libcohort.a: the objects of the internal archive that
# the public functions reach (as the shared library's link picks them, so
# the coordinator's side of common/ stays out, and the libraries only it
# needs) linked into one relocatable object whose only global definitions
# are the functions the shared library exports (the public headers'). An
# app that defines log_msg or sha256 of its own then links beside us
# without a clash. Run by client/CMakeLists.txt as
#   cmake -DLD= -DOBJCOPY= -DNM= -DAR= -DINPUT=internal.a -DSHARED=libcohort.so
#         -DOUTPUT=libcohort.a -P localize_archive.cmake
foreach(v LD OBJCOPY NM AR INPUT SHARED OUTPUT)
  if(NOT DEFINED ${v} OR "${${v}}" STREQUAL "")
    message(FATAL_ERROR "localize_archive.cmake: ${v} is not set")
  endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${SHARED}
  OUTPUT_VARIABLE dynsyms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${SHARED} failed")
endif()
string(REGEX MATCHALL "[0-9a-f]+ T [A-Za-z_0-9]+" api "${dynsyms}")
set(keep "")
set(roots "")
foreach(line ${api})
  string(REGEX REPLACE ".* T " "" name "${line}")
  string(APPEND keep "${name}\n")
  list(APPEND roots "--undefined=${name}")
endforeach()
if(keep STREQUAL "")
  message(FATAL_ERROR "${SHARED} exports no functions")
endif()

get_filename_component(dir ${OUTPUT} DIRECTORY)
set(object ${dir}/libcohort_all.o)
set(keep_file ${dir}/libcohort.keep)
file(WRITE ${keep_file} "${keep}")
file(REMOVE ${OUTPUT} ${object})
execute_process(COMMAND ${LD} -r ${roots} ${INPUT} -o ${object}
  RESULT_VARIABLE rc)
if(rc EQUAL 0)
  execute_process(COMMAND ${OBJCOPY} --keep-global-symbols=${keep_file}
    ${object} RESULT_VARIABLE rc)
endif()
if(rc EQUAL 0)
  execute_process(COMMAND ${AR} rcs ${OUTPUT} ${object} RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  file(REMOVE ${OUTPUT})
  message(FATAL_ERROR "localize_archive.cmake: making ${OUTPUT} failed")
endif()
