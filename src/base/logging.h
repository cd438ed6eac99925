// distflow's own short names for the logging macros of distflow/logging.h.
// Internal: programs that use the installed library write DF_LOG, DF_CHECK.
#pragma once

#include "distflow/logging.h"

#define LOG(severity) DF_LOG(severity)
#define CHECK(condition) DF_CHECK(condition)
#define CHECK_OK(expr) DF_CHECK_OK(expr)
#define DCHECK(condition) DF_DCHECK(condition)
