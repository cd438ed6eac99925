// distflow's own short names for the status macros of distflow/status.h.
// Internal: programs that use the installed library write DF_RETURN_IF_ERROR
// and DF_ASSIGN_OR_RETURN.
#pragma once

#include "distflow/status.h"

#define RETURN_IF_ERROR(expr) DF_RETURN_IF_ERROR(expr)
#define ASSIGN_OR_RETURN(lhs, rexpr) DF_ASSIGN_OR_RETURN(lhs, rexpr)
