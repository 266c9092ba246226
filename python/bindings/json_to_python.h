// nlohmann::json to Python objects, by walking the document (no text round
// trip): null -> None, booleans -> bool, integers -> int (64-bit signed or
// unsigned), floating point -> float (NaN and infinities -> None, as nlohmann writes
// them in the CLI's --json text: null), strings -> str, arrays -> list,
// objects -> dict (keys in the document's order). Needs the GIL.
#pragma once

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace tessera::python {

pybind11::object JsonToPython(const nlohmann::json& j);

}  // namespace tessera::python
