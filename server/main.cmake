# The server's own pieces: handlers, scheduler loop, registry, flags, main.
add_library(inferd_server STATIC
  ${CMAKE_CURRENT_LIST_DIR}/alloc.c
  ${CMAKE_CURRENT_LIST_DIR}/cli.c
  ${CMAKE_CURRENT_LIST_DIR}/core/arena.c
  ${CMAKE_CURRENT_LIST_DIR}/core/classify.c
  ${CMAKE_CURRENT_LIST_DIR}/core/control.c
  ${CMAKE_CURRENT_LIST_DIR}/core/ensemble.c
  ${CMAKE_CURRENT_LIST_DIR}/core/ensemble_plan.c
  ${CMAKE_CURRENT_LIST_DIR}/core/repeat.c
  ${CMAKE_CURRENT_LIST_DIR}/core/repeat_cfg.c
  ${CMAKE_CURRENT_LIST_DIR}/core/llm_cfg.c
  ${CMAKE_CURRENT_LIST_DIR}/core/llm_serve.c
  ${CMAKE_CURRENT_LIST_DIR}/core/llm_engine.c
  ${CMAKE_CURRENT_LIST_DIR}/core/llm_grpc.c
  ${CMAKE_CURRENT_LIST_DIR}/core/llm_text.c
  ${CMAKE_CURRENT_LIST_DIR}/core/infer.c
  ${CMAKE_CURRENT_LIST_DIR}/core/infer_validate.c
  ${CMAKE_CURRENT_LIST_DIR}/core/infer_pieces.c
  ${CMAKE_CURRENT_LIST_DIR}/core/labels.c
  ${CMAKE_CURRENT_LIST_DIR}/core/order.c
  ${CMAKE_CURRENT_LIST_DIR}/core/registry.c
  ${CMAKE_CURRENT_LIST_DIR}/core/reply.c
  ${CMAKE_CURRENT_LIST_DIR}/core/replyq.c
  ${CMAKE_CURRENT_LIST_DIR}/core/request.c
  ${CMAKE_CURRENT_LIST_DIR}/core/sched.c
  ${CMAKE_CURRENT_LIST_DIR}/grpc/rpc.c
  ${CMAKE_CURRENT_LIST_DIR}/grpc/rpc_msg.c
  ${CMAKE_CURRENT_LIST_DIR}/grpc/wire.c
  ${CMAKE_CURRENT_LIST_DIR}/http/endpoints.c
  ${CMAKE_CURRENT_LIST_DIR}/http/http_loop.c
  ${CMAKE_CURRENT_LIST_DIR}/http/rest.c
  ${CMAKE_CURRENT_LIST_DIR}/http/rest_infer.c
  ${CMAKE_CURRENT_LIST_DIR}/http/rest_generate.c
  ${CMAKE_CURRENT_LIST_DIR}/http/rest_openai.c
  ${CMAKE_CURRENT_LIST_DIR}/http/openai_req.c
  ${CMAKE_CURRENT_LIST_DIR}/http/rest_job.c
  ${CMAKE_CURRENT_LIST_DIR}/obs/crash.c
  ${CMAKE_CURRENT_LIST_DIR}/obs/log.c
  ${CMAKE_CURRENT_LIST_DIR}/obs/settings.c)
target_compile_definitions(inferd_server PUBLIC INFERD_VERSION="${PROJECT_VERSION}")
# cJSON (libcjson-dev): the REST API's JSON (server/http/rest.c, rest_infer.c; why this library: docs/dependencies.md)
pkg_check_modules(CJSON REQUIRED IMPORTED_TARGET libcjson)
# The descriptor limit and its split between the ports (server/core/fdlimit.h).
add_library(inferd_fdlimit STATIC ${CMAKE_CURRENT_LIST_DIR}/core/fdlimit.c)
target_link_libraries(inferd_fdlimit PUBLIC inferd_base)
# The copy threads that split a big batch's gather and scatter (server/core/copypool.h).
add_library(inferd_copypool STATIC ${CMAKE_CURRENT_LIST_DIR}/core/copypool.c)
target_link_libraries(inferd_copypool PUBLIC inferd_base inferd_shm Threads::Threads)
# A load's JSON config override, written as config.pbtxt text (server/core/cfgjson.h).
add_library(inferd_cfgjson STATIC ${CMAKE_CURRENT_LIST_DIR}/core/cfgjson.c)
target_link_libraries(inferd_cfgjson PUBLIC inferd_base PkgConfig::PROTOBUFC PkgConfig::CJSON m)
# Every REST JSON body is parsed through its memory estimate and budget (server/http/jsonmem.h).
add_library(inferd_jsonmem STATIC ${CMAKE_CURRENT_LIST_DIR}/http/jsonmem.c)
target_link_libraries(inferd_jsonmem PUBLIC inferd_base PkgConfig::CJSON)
target_link_libraries(inferd_server PUBLIC inferd_llm inferd_tok inferd_chat_template inferd_fdlimit inferd_copypool inferd_cfgjson inferd_jsonmem inferd_grpc inferd_tls inferd_http inferd_httpz inferd_reflection inferd_protoset
  inferd_hist inferd_trace inferd_dashboard inferd_gpumon inferd_shm inferd_cuda_shm
  inferd_batcher inferd_model inferd_config inferd_graph inferd_proto inferd_base PkgConfig::LIBUV PkgConfig::CJSON Threads::Threads
  ${CMAKE_DL_LIBS})

if(INFERD_HAVE_CUDA)
  target_link_libraries(inferd_server PUBLIC inferd_cuda)  # device discovery at start-up
  # the generative backend's GPU runner (server/core/llm_engine.c)
  target_link_libraries(inferd_server PUBLIC inferd_llm_cuda CUDA::cudart)
endif()

add_executable(inferd ${CMAKE_CURRENT_LIST_DIR}/main.c)
# jemalloc (libjemalloc-dev) as the server's malloc: glibc's per-thread arenas
# let RSS climb under cancel-heavy load (+21 % in 4 minutes of the soak, still
# rising) where jemalloc held it flat at the same throughput, and capping
# glibc's arenas instead cost a fifth of the 512-stream throughput
# (docs/dependencies.md; tests/bench/RESULTS.md). Linked ahead of everything else, so
# the executable's first DT_NEEDED entry supplies malloc to libgrpc, CUDA and
# the rest (srv_alloc_describe logs which one runs). Not with sanitizers,
# which bring their own malloc.
option(INFERD_JEMALLOC "Link the server against jemalloc when it is installed" ON)
set(INFERD_JEMALLOC_LIBRARY "")
if(INFERD_JEMALLOC AND NOT INFERD_SANITIZE)
  find_library(JEMALLOC_LIBRARY NAMES jemalloc)
  if(JEMALLOC_LIBRARY)
    # --no-as-needed: nothing before it on the line calls malloc, and Debian's
    # gcc links --as-needed by default, which would drop it silently
    set(INFERD_JEMALLOC_LIBRARY "-Wl,--push-state,--no-as-needed" ${JEMALLOC_LIBRARY} "-Wl,--pop-state")
  else()
    message(WARNING "jemalloc not found (Debian: libjemalloc-dev; deploy/install-deps.sh installs it): "
                    "the server runs on glibc's malloc, whose RSS creeps up under bursts of cancelled calls")
  endif()
endif()
target_link_libraries(inferd PRIVATE ${INFERD_JEMALLOC_LIBRARY} inferd_server)
