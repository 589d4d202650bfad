# Helpers: dyn_add_module() declares one lib/dyn/<module> target with its allowed dependencies;
# dyn_add_tool() adds a binary together with its generated man page and shell completions.

# dyn_unity(TARGET): with DYN_UNITY_BUILD, the target's sources compile as one unit (up to 16
# files per unit). Names at namespace scope in a .cpp (anonymous namespaces included) must then
# be unique within the folder.
function(dyn_unity target)
  if(DYN_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
    # In a unity source each .cpp is an included file, so GCC takes a class defined there that
    # holds an anonymous-namespace type (EventServer::Impl, a coroutine frame) for one in a
    # header and warns; within one translation unit that is what the code means.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()

# dyn_add_module(NAME DEPS ...): a static library dyn_<NAME> from every .cpp in the calling folder.
# DEPS are exactly the module's "uses" in lib/README.md; scripts/check-module-graph.py (test
# e2e.module-graph) checks that, and every include, against the table.
function(dyn_add_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_library(dyn_${name} STATIC ${srcs})
  dyn_unity(dyn_${name})
  target_include_directories(dyn_${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  target_link_libraries(dyn_${name} PUBLIC ${M_DEPS})
endfunction()

# dyn_add_tool(NAME DEPS ...): executable from every .cpp in the calling folder (plus
# cmd/common/*.cpp) + man/NAME.1 + completions for bash, zsh, fish.
# The man page prose comes from man/NAME.1.in; its OPTIONS section is generated from the CLI11 app
# by the binary's hidden --generate=man, so help, man page and completions never disagree.
function(dyn_add_tool name)
  cmake_parse_arguments(T "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  add_executable(${name} ${srcs})
  dyn_unity(${name})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/cmd/common)
  target_link_libraries(${name} PRIVATE ${T_DEPS} dyn_cli)
  if(DYN_JEMALLOC)
    # Whole archive: malloc, free and operator new's allocator all come from jemalloc, also for
    # the shared libraries the tool loads (the executable's definitions interpose theirs).
    target_sources(${name} PRIVATE ${PROJECT_SOURCE_DIR}/cmd/common/malloc_conf.cpp)
    target_link_libraries(${name} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${DYN_JEMALLOC_LIB}>" Threads::Threads
                          ${CMAKE_DL_LIBS} m)
  endif()
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  set(gen ${PROJECT_BINARY_DIR}/generated)
  set(manin ${PROJECT_SOURCE_DIR}/man/${name}.1.in)
  add_custom_command(
    OUTPUT ${gen}/man/${name}.1 ${gen}/completions/${name}.bash ${gen}/completions/_${name}
           ${gen}/completions/${name}.fish
    COMMAND ${CMAKE_COMMAND} -E make_directory ${gen}/man ${gen}/completions
    COMMAND $<TARGET_FILE:${name}> --generate=man --man-template=${manin} > ${gen}/man/${name}.1
    COMMAND $<TARGET_FILE:${name}> --generate=bash > ${gen}/completions/${name}.bash
    COMMAND $<TARGET_FILE:${name}> --generate=zsh > ${gen}/completions/_${name}
    COMMAND $<TARGET_FILE:${name}> --generate=fish > ${gen}/completions/${name}.fish
    DEPENDS ${name} ${manin}
    COMMENT "Generating man page and completions for ${name}")
  add_custom_target(${name}_docs ALL DEPENDS ${gen}/man/${name}.1)
  install(TARGETS ${name} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${gen}/man/${name}.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${gen}/completions/${name}.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
          RENAME ${name})
  install(FILES ${gen}/completions/_${name} DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
  install(FILES ${gen}/completions/${name}.fish DESTINATION ${CMAKE_INSTALL_DATADIR}/fish/vendor_completions.d)
endfunction()
