// AllGatherStrings: every rank's string, on every rank (two all-gathers:
// the lengths, then the strings padded to the longest). Collective over the
// communicator; fails as its collectives do (bounded by its timeout).
#pragma once

#include <string>
#include <vector>

#include "tessera/base/status.h"
#include "tessera/comm/api/communicator.h"

namespace tessera::comm {

StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& comm, const std::string& mine);

}  // namespace tessera::comm
