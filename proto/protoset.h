// The FileDescriptorSet of everything inferd serves over gRPC (our service,
// its model config, health, reflection v1 and v1alpha), embedded at build
// time by proto/protoset.cmake. server/grpc/reflection.c answers from it.
#ifndef INFERD_PROTO_PROTOSET_H
#define INFERD_PROTO_PROTOSET_H

#include <stddef.h>

extern const unsigned char inferd_protoset[];
extern const size_t inferd_protoset_len;

#endif
