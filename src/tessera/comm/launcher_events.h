// The agent's event log (internal to the launcher): every event of a
// `tessera launch` job with restarts (start, failure, restart,
// spare_assigned, restored, agent_lost, gave_up, done; elastic jobs:
// membership, node_lost, node_joined) as one JSON object
// per line in the --events file, written with one O_APPEND write(2) each
// (so lines never interleave, even with several writers), and the matching
// human message on the launcher's stderr ("tessera launch: ...").
// Every object has "time" (Unix seconds), "event" and "node". Not
// thread-safe: used by the launcher's single loop.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"

namespace tessera::comm::launch {

class EventLog {
 public:
  EventLog(int stderr_fd, int node_rank) : stderr_fd_(stderr_fd), node_rank_(node_rank) {}
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Opens (creating it and its directory) the JSON-lines file; "" = none.
  Status Open(const std::string& path);
  const std::string& path() const { return path_; }

  // A message on stderr only.
  void Say(const std::string& text) const;
  // `fields` (an object) plus time/event/node to the file, and `message`
  // (if not empty) on stderr.
  void Record(const std::string& event, nlohmann::json fields, const std::string& message = "");

 private:
  int stderr_fd_;
  int node_rank_;
  int fd_ = -1;
  std::string path_;
};

// Unix time in seconds (with fractions).
double UnixSeconds();

}  // namespace tessera::comm::launch
