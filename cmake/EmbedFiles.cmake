# embed_files(OUT <cpp> FUNCTION <c++ name> ROOT <dir> PREFIX <prefix> GLOBS <patterns...>)
# Generates a .cpp that defines `std::map<std::string, std::string> FUNCTION()` with every matching file under
# ROOT keyed by PREFIX + its ROOT-relative path. Regenerated when any embedded file changes.
function(embed_files)
  cmake_parse_arguments(E "" "OUT;FUNCTION;ROOT;PREFIX" "GLOBS" ${ARGN})
  set(patterns)
  foreach(g ${E_GLOBS})
    list(APPEND patterns "${E_ROOT}/${g}")
  endforeach()
  file(GLOB_RECURSE files CONFIGURE_DEPENDS ${patterns})
  list(SORT files)
  add_custom_command(
    OUTPUT ${E_OUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${E_OUT} -DFUNCTION=${E_FUNCTION} -DROOT=${E_ROOT} -DPREFIX=${E_PREFIX}
            "-DFILES=${files}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_files_script.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_files_script.cmake
    COMMENT "Embedding ${E_PREFIX} sources"
    VERBATIM)
endfunction()
