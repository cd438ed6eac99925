// StepStats (runtime/step_stats.h) to and from its wire form (proto/worker.proto),
// for the traces that RunGraph and RunStep answers carry. Stateless.
#pragma once

#include "distflow/step_stats.h"
#include "proto/worker.pb.h"

namespace distflow {

// Appends `stats`' devices to `out`.
void AppendStepStatsProto(const StepStats& stats, proto::StepStats* out);
// Appends `in`'s devices to `out`.
void AppendStepStats(const proto::StepStats& in, StepStats* out);

}  // namespace distflow
