#include "kernels/cpu/histogram.h"

#include <algorithm>
#include <cfloat>

namespace distflow {

const std::vector<double>& Histogram::DefaultLimits() {
  static const std::vector<double>* limits = [] {
    std::vector<double> positive;
    for (double v = 1.0e-12; v < 1.0e20; v *= 1.1) positive.push_back(v);
    positive.push_back(DBL_MAX);
    auto* all = new std::vector<double>;
    all->reserve(2 * positive.size() + 1);
    for (auto it = positive.rbegin(); it != positive.rend(); ++it) all->push_back(-*it);
    all->push_back(0.0);
    all->insert(all->end(), positive.begin(), positive.end());
    return all;
  }();
  return *limits;
}

Histogram::Histogram() : limits_(DefaultLimits()), buckets_(limits_.size(), 0.0), min_(DBL_MAX), max_(-DBL_MAX) {}

void Histogram::Add(double value) {
  size_t b = static_cast<size_t>(std::upper_bound(limits_.begin(), limits_.end(), value) - limits_.begin());
  // Only DBL_MAX itself lands past the last limit; it belongs to the last bucket.
  if (b >= buckets_.size()) b = buckets_.size() - 1;
  buckets_[b] += 1.0;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  num_ += 1;
  sum_ += value;
  sum_squares_ += value * value;
}

void Histogram::EncodeToProto(tensorboard::HistogramProto* out) const {
  out->set_min(num_ > 0 ? min_ : 0.0);
  out->set_max(num_ > 0 ? max_ : 0.0);
  out->set_num(num_);
  out->set_sum(sum_);
  out->set_sum_squares(sum_squares_);
  for (size_t i = 0; i < buckets_.size();) {
    double limit = limits_[i];
    double count = buckets_[i];
    ++i;
    if (count <= 0.0) {
      while (i < buckets_.size() && buckets_[i] <= 0.0) limit = limits_[i++];
    }
    out->add_bucket_limit(limit);
    out->add_bucket(count);
  }
}

}  // namespace distflow
