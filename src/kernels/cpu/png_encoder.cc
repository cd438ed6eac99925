#include "kernels/cpu/png_encoder.h"

#include <zlib.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace distflow {
namespace {

void PutBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>((v >> shift) & 0xff));
}

// A chunk: length, type, data, and the CRC-32 of type and data.
void PutChunk(std::string* out, const char type[4], const std::string& data) {
  PutBigEndian32(out, static_cast<uint32_t>(data.size()));
  size_t start = out->size();
  out->append(type, 4);
  out->append(data);
  uLong crc = crc32(0L, reinterpret_cast<const Bytef*>(out->data() + start), static_cast<uInt>(out->size() - start));
  PutBigEndian32(out, static_cast<uint32_t>(crc));
}

}  // namespace

absl::StatusOr<std::string> EncodePng(const uint8_t* pixels, int64_t width, int64_t height, int channels) {
  static const uint8_t kColorType[] = {0, 0, 4, 2, 6};  // by channels: gray, gray+alpha, RGB, RGBA
  if (channels < 1 || channels > 4) {
    return absl::InvalidArgumentError(absl::StrCat("PNG images have 1 to 4 channels, not ", channels));
  }
  if (width <= 0 || height <= 0 || width > (int64_t{1} << 24) || height > (int64_t{1} << 24)) {
    return absl::InvalidArgumentError(absl::StrCat("Cannot encode a ", width, "x", height, " image as PNG"));
  }
  const size_t row = static_cast<size_t>(width) * static_cast<size_t>(channels);
  std::vector<uint8_t> raw;
  raw.reserve((row + 1) * static_cast<size_t>(height));
  for (int64_t y = 0; y < height; ++y) {
    raw.push_back(0);  // filter type: none
    const uint8_t* p = pixels + static_cast<size_t>(y) * row;
    raw.insert(raw.end(), p, p + row);
  }
  uLongf deflated_size = compressBound(static_cast<uLong>(raw.size()));
  std::string deflated(deflated_size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(deflated.data()), &deflated_size, raw.data(), static_cast<uLong>(raw.size()),
                Z_DEFAULT_COMPRESSION) != Z_OK) {
    return absl::InternalError("zlib failed to compress a PNG image");
  }
  deflated.resize(deflated_size);

  std::string header;
  PutBigEndian32(&header, static_cast<uint32_t>(width));
  PutBigEndian32(&header, static_cast<uint32_t>(height));
  header.push_back(8);  // bits per sample
  header.push_back(static_cast<char>(kColorType[channels]));
  header.append(3, '\0');  // deflate, adaptive filtering, no interlace

  std::string png("\x89PNG\r\n\x1a\n", 8);
  PutChunk(&png, "IHDR", header);
  PutChunk(&png, "IDAT", deflated);
  PutChunk(&png, "IEND", "");
  return png;
}

}  // namespace distflow
