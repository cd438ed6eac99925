// Device: where kernels run. A CPU device has a full name
// ("/job:localhost/replica:0/task:0/device:CPU:0"), an optional intra-op
// thread pool that big kernels split their work over, and the resource
// manager holding the variables placed on it.
//
// The device owns its resource manager; the pool is borrowed. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "base/thread_pool.h"
#include "kernels/resource_mgr.h"

namespace distflow {

class Device {
 public:
  // `intra_op_pool` may be null (kernels then run on the calling thread) and
  // must outlive the device.
  Device(std::string name, std::string type, ThreadPool* intra_op_pool)
      : name_(std::move(name)), type_(std::move(type)), intra_op_pool_(intra_op_pool) {}

  const std::string& name() const { return name_; }
  const std::string& device_type() const { return type_; }
  ThreadPool* intra_op_pool() const { return intra_op_pool_; }
  ResourceMgr* resource_manager() { return &resources_; }

 private:
  const std::string name_;
  const std::string type_;
  ThreadPool* const intra_op_pool_;
  ResourceMgr resources_;
};

}  // namespace distflow
