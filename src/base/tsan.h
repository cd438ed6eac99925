// Happens-before edges that ThreadSanitizer cannot see by itself.
//
// gRPC's core is Debian's uninstrumented build, so a completion callback it
// runs on one of its threads is not ordered, for TSan, after the code that
// started the call, although gRPC orders them. Mark the hand-over: call
// DF_TSAN_HANDOFF(p) just before starting the call and DF_TSAN_RECEIVE(p)
// first thing in its callback, with the same address (the call's state).
// Both are no-ops unless the build defines DISTFLOW_TSAN (scripts/tsan.sh).
#pragma once

#ifdef DISTFLOW_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define DF_TSAN_HANDOFF(p) __tsan_release(const_cast<void*>(static_cast<const void*>(p)))
#define DF_TSAN_RECEIVE(p) __tsan_acquire(const_cast<void*>(static_cast<const void*>(p)))
#else
#define DF_TSAN_HANDOFF(p) static_cast<void>(p)
#define DF_TSAN_RECEIVE(p) static_cast<void>(p)
#endif
