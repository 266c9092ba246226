#include "json_to_python.h"

#include <cmath>
#include <string>

namespace py = pybind11;

namespace tessera::python {

py::object JsonToPython(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: {
      // As the CLI's text: nlohmann writes a non-finite number as null.
      const double v = j.get<double>();
      if (!std::isfinite(v)) return py::none();
      return py::float_(v);
    }
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::binary: {
      const auto& b = j.get_binary();
      return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
    }
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const nlohmann::json& e : j) out.append(JsonToPython(e));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (auto it = j.begin(); it != j.end(); ++it) out[py::str(it.key())] = JsonToPython(it.value());
      return out;
    }
  }
  return py::none();
}

}  // namespace tessera::python
