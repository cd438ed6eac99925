// The version of the distflow library a program runs with (which may be
// newer than the headers it was built against, within one major version).
#pragma once

namespace distflow {

// "MAJOR.MINOR.PATCH".
const char* Version();

}  // namespace distflow
