// Device filters (SessionOptions::device_filters, TensorFlow's
// ConfigProto.device_filters): which tasks a session may use. Stateless;
// thread-safe.
#pragma once

#include <string>
#include <vector>

namespace distflow {

// True if `task` ("/job:ps/replica:0/task:1") matches one of `filters`
// (partial device names such as "/job:ps" or "/job:worker/task:3"), or if
// there are no filters. Unparsable names match nothing.
bool PassesFilters(const std::string& task, const std::vector<std::string>& filters);

}  // namespace distflow
