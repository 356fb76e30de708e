// engine/cpu/dnnl_internal.h: what the oneDNN modules of engine/cpu share
// beyond conv_dnnl.h (the context's engine and stream, for qconv_dnnl.c).
// Not a public header.
#ifndef INFERD_ENGINE_DNNL_INTERNAL_H
#define INFERD_ENGINE_DNNL_INTERNAL_H

#include <dnnl.h>

#include "engine/cpu/conv_dnnl.h"

dnnl_engine_t eng_dnnl__engine(eng_dnnl_ctx *c);
dnnl_stream_t eng_dnnl__stream(eng_dnnl_ctx *c);

#endif
