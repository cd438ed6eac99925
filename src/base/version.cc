#include "distflow/version.h"

namespace distflow {

const char* Version() { return DISTFLOW_VERSION; }

}  // namespace distflow
