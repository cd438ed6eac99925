// The histogram of HistogramSummary, with TensorFlow's default bucket
// limits, so that TensorBoard draws distflow's histograms as it draws
// TensorFlow's: limits at ±1e-12·1.1^k up to 1e20, 0 between them, and
// ±DBL_MAX at the ends. A value v counts in the first bucket whose limit is
// greater than v. Not thread-safe; one per summary.
#pragma once

#include <vector>

#include "proto/summary.pb.h"

namespace distflow {

class Histogram {
 public:
  Histogram();

  void Add(double value);

  // min, max, num, sum, sum_squares and the buckets. Every run of empty
  // buckets is written as one empty bucket (the limit of its last), as
  // TensorFlow's summaries do; an empty histogram has min 0 and max 0.
  void EncodeToProto(tensorboard::HistogramProto* out) const;

  // The default limits (shared, computed once).
  static const std::vector<double>& DefaultLimits();

 private:
  const std::vector<double>& limits_;
  std::vector<double> buckets_;
  double min_, max_, num_ = 0, sum_ = 0, sum_squares_ = 0;
};

}  // namespace distflow
