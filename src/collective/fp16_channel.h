// fp16 compression for CollectiveReduce (Horovod's Compression.fp16): the
// values of a float32 or float64 reduction travel between ranks as IEEE
// half-precision numbers, half or a quarter of the bytes.
//
// distflow has no float16 dtype in its graphs, so the cast Horovod puts
// around the all-reduce happens inside the collective: each rank rounds its
// input to fp16 (RoundToHalf), the algorithm runs over a channel that
// carries every tensor it sends as fp16 bits (Fp16Channel) and widens what
// it receives, and the result is rounded to fp16 on every rank. Arithmetic
// happens in the input's dtype on values that are fp16 numbers, and each
// partial sum is rounded back to fp16 when it is sent: float32 holds the
// exact sum of two fp16 numbers rounded only once (24 >= 2 * 11 + 2 bits),
// so one hop of the ring rounds exactly as an addition done in fp16 would
// (Horovod's CPU float16 sum); the direct exchange adds all n inputs before
// rounding, which is at least as accurate. Every rank rounds the same values
// the same way, so the replicas still get identical bytes.
//
// Values beyond fp16's range (65504) become infinities, as in Horovod.
// Thread-safe like the channel it wraps.
#pragma once

#include <cstdint>
#include <memory>

#include "collective/transport.h"

namespace distflow {

// IEEE binary16 conversions, correctly rounded (to nearest, ties to even;
// overflow to infinity, NaN kept): `v` to its fp16 bit pattern, and a bit
// pattern to its exact value.
uint16_t ToHalfBits(double v);
double FromHalfBits(uint16_t h);

// Rounds every element of a float32 or float64 tensor to the nearest fp16
// number (ties to even), in place; other dtypes are left as they are.
void RoundToHalf(Tensor* t);

// A channel that sends float32/float64 tensors of `dtype` as fp16 bits (a
// uint8 tensor of 2 bytes per element) and turns what it receives back into
// `dtype`. A peer that sends an uncompressed tensor fails the receive,
// naming the peer: every rank must run the op with the same compression.
std::shared_ptr<CollectiveChannel> MakeFp16Channel(std::shared_ptr<CollectiveChannel> inner, DataType dtype);

}  // namespace distflow
