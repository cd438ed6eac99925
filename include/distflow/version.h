// The version of the distflow library a program runs with (which may be
// newer than the headers it was built against, within one major version).
#pragma once
#include "distflow/export.h"

namespace distflow {

// "MAJOR.MINOR.PATCH".
DISTFLOW_EXPORT const char* Version();

}  // namespace distflow
