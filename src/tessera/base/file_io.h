// Small file helpers shared by the modules that write files users keep
// (run records, reports, trained models): atomic replacement.
#pragma once

#include <string>

#include "tessera/base/status.h"

namespace tessera {

// Writes `contents` to `path` atomically: a temp file in the same folder,
// fsync, rename. An existing file is replaced only once the new one is whole;
// on any error it is left as it was and the temp file is removed.
Status WriteFileAtomic(const std::string& path, const std::string& contents);

}  // namespace tessera
