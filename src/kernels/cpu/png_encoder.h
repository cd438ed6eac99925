// A minimal PNG encoder for ImageSummary: 8-bit grayscale, grayscale +
// alpha, RGB or RGBA, no interlacing, every row with filter 0 and the whole
// image deflated by zlib. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace distflow {

// `pixels` holds height rows of width * channels bytes (channels 1..4).
absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int64_t width, int64_t height, int channels);

}  // namespace distflow
