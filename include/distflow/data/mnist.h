// MNIST-format (IDX) data sets: MNIST and Fashion-MNIST, gzipped or not.
//
// ReadDataSets(dir) loads train (minus the last `validation_size` examples),
// validation and test splits; images are float32 in [0, 1] shaped [N, 784],
// labels int32 class ids (OneHot gives one-hot rows). NextBatch(n) walks a
// split in an order reshuffled every epoch from a seed.
//
// Every file is validated (magic number, counts, sizes, label range); a
// missing or corrupt file is an error naming the file and, for the default
// directory, the package that provides it. A DataSet is not thread-safe.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distflow/export.h"
#include "distflow/tensor.h"

namespace distflow {
namespace data {

// Where Debian's dataset-fashion-mnist package installs its files.
inline constexpr char kDefaultFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

class DISTFLOW_EXPORT DataSet {
 public:
  DataSet() = default;
  DataSet(Tensor images, Tensor labels, uint64_t seed);

  int64_t num_examples() const { return images_.IsInitialized() ? images_.dim_size(0) : 0; }
  const Tensor& images() const { return images_; }  // float32 [N, 784]
  const Tensor& labels() const { return labels_; }  // int32 [N]
  int64_t epochs_completed() const { return epochs_; }

  // The next `n` examples (n <= num_examples()); a new shuffled epoch starts
  // when the current one runs out. Returns (images [n,784], labels [n]).
  std::pair<Tensor, Tensor> NextBatch(int64_t n);

 private:
  Tensor images_, labels_;
  std::vector<int64_t> order_;
  int64_t pos_ = 0;
  int64_t epochs_ = 0;
  std::mt19937_64 rng_;
};

struct DISTFLOW_EXPORT DataSets {
  DataSet train, validation, test;
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir`.
DISTFLOW_EXPORT absl::StatusOr<DataSets> ReadDataSets(const std::string& dir = kDefaultFashionMnistDir,
                                                      int64_t validation_size = 5000, uint64_t seed = 0);

// What one task of a data-parallel job reads (ReadDataSetShard).
struct DISTFLOW_EXPORT ShardOptions {
  int num_shards = 1;   // usually the number of workers
  int shard_index = 0;  // this worker's, in [0, num_shards)
  int64_t validation_size = 5000;
  uint64_t seed = 0;
  bool validation = true;  // read the validation split (else it stays empty)
  bool test = true;        // read the test split (else it stays empty)
};

// Like ReadDataSets, but `train` holds only the shard's examples: those at
// positions i of the training split (what is left after the validation
// examples are cut off) with i % num_shards == shard_index, as tf.data's
// Dataset.shard(num_shards, index) picks them. Only the shard's images are
// converted to float, so a task's memory for the training set is 1/num_shards
// of the whole (the compressed file is still read, and inflated for a moment,
// in full). The validation and test splits are whole, or skipped.
DISTFLOW_EXPORT absl::StatusOr<DataSets> ReadDataSetShard(const std::string& dir, const ShardOptions& options);

// One IDX file each; `path` may end in .gz.
DISTFLOW_EXPORT absl::StatusOr<Tensor> ReadIdxImages(const std::string& path);  // float32 [N, rows*cols] in [0,1]
DISTFLOW_EXPORT absl::StatusOr<Tensor> ReadIdxLabels(const std::string& path);  // int32 [N], each in [0, 9]
// Parses IDX bytes already in memory (`name` is used in errors).
DISTFLOW_EXPORT absl::StatusOr<Tensor> ParseIdxImages(const std::string& bytes, const std::string& name);
DISTFLOW_EXPORT absl::StatusOr<Tensor> ParseIdxLabels(const std::string& bytes, const std::string& name);

}  // namespace data
}  // namespace distflow
