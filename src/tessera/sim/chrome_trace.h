// Chrome trace-event JSON of a replayed step (open in Perfetto or
// chrome://tracing), built with nlohmann-json: names are escaped by the
// library, one process per pipeline stage with a thread per stream
// (compute, sends to the next and previous stage, data-parallel), times in
// microseconds. NaN and infinities are never emitted: an event whose start or
// end is not finite is left out and counted in "otherData.omitted_events".
// Pure function; thread-safe.
#pragma once

#include <string>

#include "tessera/sim/step_replay.h"

namespace tessera::sim {

// Declared in step_replay.h as well (its callers need not include this file).
std::string ChromeTraceJson(const StepResult& result);

}  // namespace tessera::sim
