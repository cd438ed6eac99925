// DISTFLOW_EXPORT marks what libdistflow.so exports: the classes, functions
// and data of these public headers. distflow is compiled with
// -fvisibility=hidden, so every other symbol of the library stays inside it
// and can change between releases without breaking a program built against
// an older one.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define DISTFLOW_EXPORT __attribute__((visibility("default")))
#else
#define DISTFLOW_EXPORT
#endif
