// engine/cpu/dnnl_internal.h: what the oneDNN modules of engine/cpu share
// beyond conv_dnnl.h (the context's engine and stream, for qconv_dnnl.c).
// Not a public header.
#ifndef INFERD_ENGINE_DNNL_INTERNAL_H
#define INFERD_ENGINE_DNNL_INTERNAL_H

#include <dnnl.h>

#include "engine/cpu/conv_dnnl.h"
#include "engine/cpu/dnnl_util.h"

dnnl_engine_t eng_dnnl__engine(eng_dnnl_ctx *c);
dnnl_stream_t eng_dnnl__stream(eng_dnnl_ctx *c);

// The md of an activation [n, ch, spatial sp...] of g's batch and rank, of
// type t: plain (dense), or any layout (the primitive chooses).
dnnl_status_t eng_dnnl__act_md(eng_dnnl_md *md, const k_window *g, int64_t ch, const int64_t *sp, dnnl_data_type_t t,
                               int any);

#endif
