// server/core/llm_grpc.h: a ModelStreamInfer request to a generative model
// (backend "inferd_llm"), from its validated tensors (TensorRT-LLM's names,
// llm_cfg.h) to the version's runners (llm_serve.h), and its answers back
// as ModelStreamInferResponses: output_ids and sequence_length, one
// response per step's tokens when streaming, one with every token when not,
// each carrying triton_final_response.
#ifndef INFERD_SERVER_LLM_GRPC_H
#define INFERD_SERVER_LLM_GRPC_H

struct srv_server;
struct srv_request;

// Takes r (validated against its version's tensors, counted in its pending)
// on a CQ thread. A request the backend refuses (not on a stream, values
// out of range, shared memory) is answered at once with one error response.
void srv_llm_submit_request(struct srv_server *s, struct srv_request *r);

#endif
