add_library(inferd_batcher STATIC ${CMAKE_CURRENT_LIST_DIR}/batcher.c ${CMAKE_CURRENT_LIST_DIR}/lattarget.c ${CMAKE_CURRENT_LIST_DIR}/sequence.c
            ${CMAKE_CURRENT_LIST_DIR}/kvblocks.c ${CMAKE_CURRENT_LIST_DIR}/iter.c)
target_link_libraries(inferd_batcher PUBLIC inferd_base m)
