#include "tessera/comm/api/gather_strings.h"

#include <algorithm>
#include <cstdint>

namespace tessera::comm {

StatusOr<std::vector<std::string>> AllGatherStrings(Communicator& c, const std::string& mine) {
  int64_t len = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lens(c.size());
  TESSERA_RETURN_IF_ERROR(c.AllGather(&len, lens.data(), 1, DataType::kInt64));
  const int64_t max_len = std::max<int64_t>(1, *std::max_element(lens.begin(), lens.end()));
  std::string padded = mine;
  padded.resize(max_len);
  std::string all(max_len * c.size(), '\0');
  TESSERA_RETURN_IF_ERROR(c.AllGather(padded.data(), all.data(), max_len, DataType::kUint8));
  std::vector<std::string> out;
  for (int r = 0; r < c.size(); ++r) out.push_back(all.substr(r * max_len, lens[r]));
  return out;
}

}  // namespace tessera::comm
