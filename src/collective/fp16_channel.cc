#include "collective/fp16_channel.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace distflow {
namespace {

// _Float16 (GCC >= 12, Clang >= 15 on x86-64 and AArch64) converts with the
// hardware's instruction where there is one (F16C) and libgcc's correctly
// rounded routine elsewhere.
using Half = _Float16;
static_assert(sizeof(Half) == 2);

template <typename T>
void Round(T* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<Half>(v[i]));
}

template <typename T>
void Pack(const T* in, unsigned char* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const Half h = static_cast<Half>(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

template <typename T>
void Unpack(const unsigned char* in, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    Half h;
    std::memcpy(&h, in + 2 * i, 2);
    out[i] = static_cast<T>(h);
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
