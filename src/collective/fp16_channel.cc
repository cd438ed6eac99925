#include "collective/fp16_channel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace distflow {

// IEEE binary16 by hand, correctly rounded (to nearest, ties to even):
// _Float16 would do it in one cast, but Clang before 15 (the fuzz build's)
// has no _Float16 on x86-64, and x86-64-v2 has no F16C. Both conversions
// go through double, which holds every float and every half exactly, so
// the only rounding is the one to 11 significant bits (nearbyint, in the
// default rounding mode). fp16_channel_test checks these against the
// compiler's _Float16.
uint16_t ToHalfBits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (std::isnan(a)) return sign | 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;  // past the midpoint of 65504 and 65536: infinity
  if (a < 0x1p-14) {                       // subnormal (or zero): multiples of 2^-24
    // 1024 (rounded up to the smallest normal) is that normal's bit pattern.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24));
  }
  int k = 0;
  std::frexp(a, &k);  // a = f * 2^k, f in [0.5, 1): a in [2^(k-1), 2^k)
  int e = k - 1;
  double m = std::nearbyint(std::ldexp(a, 10 - e));  // in [1024, 2048]
  if (m == 2048.0) {
    m = 1024.0;
    ++e;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | (static_cast<int>(m) - 1024));
}

double FromHalfBits(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), -24);
  if (e == 31)
    return m == 0 ? sign * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  return sign * std::ldexp(static_cast<double>(1024 + m), e - 25);
}

namespace {

template <typename T>
void Round(T* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(FromHalfBits(ToHalfBits(static_cast<double>(v[i]))));
}

template <typename T>
void Pack(const T* in, unsigned char* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = ToHalfBits(static_cast<double>(in[i]));
    std::memcpy(out + 2 * i, &h, 2);
  }
}

template <typename T>
void Unpack(const unsigned char* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = static_cast<T>(FromHalfBits(h));
  }
}

bool IsCompressible(DataType dt) { return dt == DT_FLOAT || dt == DT_DOUBLE; }

class Fp16Channel final : public CollectiveChannel {
 public:
  Fp16Channel(std::shared_ptr<CollectiveChannel> inner, DataType dtype) : inner_(std::move(inner)), dtype_(dtype) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string RankName(int r) const override { return inner_->RankName(r); }
  void Abort(const absl::Status& status) override { inner_->Abort(status); }

  absl::Status Send(int to, const std::string& tag, const Tensor& value) override {
    if (!IsCompressible(value.dtype())) return inner_->Send(to, tag, value);
    const int64_t n = value.NumElements();
    Tensor packed(DT_UINT8, TensorShape({2 * n}));
    if (n > 0) {
      auto* out = static_cast<unsigned char*>(packed.raw_data());
      if (value.dtype() == DT_FLOAT) {
        Pack(value.flat<float>().data(), out, n);
      } else {
        Pack(value.flat<double>().data(), out, n);
      }
    }
    return inner_->Send(to, tag, packed);
  }

  void RecvAsync(int from, const std::string& tag, RecvCallback done) override {
    inner_->RecvAsync(
        from, tag,
        [this_rank = RankName(rank()), from_name = RankName(from), dtype = dtype_, done = std::move(done)](
            absl::Status s, Tensor got) {
          if (!s.ok()) {
            done(std::move(s), Tensor());
            return;
          }
          if (got.dtype() != DT_UINT8 || got.NumElements() % 2 != 0) {
            done(absl::InvalidArgumentError(absl::StrCat(
                     from_name, " sent ", DataTypeName(got.dtype()), " ", got.shape().DebugString(), " where ",
                     this_rank,
                     " expected fp16-compressed values: every rank must run the op with the same compression")),
                 Tensor());
            return;
          }
          const int64_t n = got.NumElements() / 2;
          Tensor wide(dtype, TensorShape({n}));
          if (n > 0) {
            const auto* in = static_cast<const unsigned char*>(got.raw_data());
            if (dtype == DT_FLOAT) {
              Unpack(in, wide.flat<float>().data(), n);
            } else {
              Unpack(in, wide.flat<double>().data(), n);
            }
          }
          done(absl::OkStatus(), std::move(wide));
        });
  }

 private:
  const std::shared_ptr<CollectiveChannel> inner_;
  const DataType dtype_;
};

}  // namespace

void RoundToHalf(Tensor* t) {
  const int64_t n = t->NumElements();
  if (n == 0) return;
  if (t->dtype() == DT_FLOAT) Round(t->flat<float>().data(), n);
  if (t->dtype() == DT_DOUBLE) Round(t->flat<double>().data(), n);
}

std::shared_ptr<CollectiveChannel> MakeFp16Channel(std::shared_ptr<CollectiveChannel> inner, DataType dtype) {
  return std::make_shared<Fp16Channel>(std::move(inner), dtype);
}

}  // namespace distflow
