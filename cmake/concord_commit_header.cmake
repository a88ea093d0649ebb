# concord_commit_header(TARGET): TARGET's sources may include "concord_commit.h",
# which defines CONCORD_COMMIT, the commit the tree is at (cmake/concord_commit.cmake,
# run at every build of TARGET and rewriting the header only when the commit changed).
# concord-bench's records name it, and so does concord.build_commit().
function(concord_commit_header target)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/${target}_generated)
  add_custom_target(${target}_commit
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUT=${dir}/concord_commit.h
            -P ${PROJECT_SOURCE_DIR}/cmake/concord_commit.cmake
    BYPRODUCTS ${dir}/concord_commit.h
    COMMENT "${target}: the commit the tree is at")
  add_dependencies(${target} ${target}_commit)
  target_include_directories(${target} PRIVATE ${dir})
endfunction()
