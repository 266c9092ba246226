#include "tessera/train/config_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <toml++/toml.h>

namespace tessera::train {
namespace {

std::string NodeType(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "other";
  }
}

Status TypeError(const std::string& key, const std::string& expected, const toml::node& n, const std::string& where) {
  return InvalidArgument("config key '{}' ({}) must be {}, got {}", key, where, expected, NodeType(n));
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

StatusOr<int64_t> AsInt(const std::string& key, const toml::node& n, const std::string& where) {
  if (auto v = n.value_exact<int64_t>()) return *v;
  return TypeError(key, "an integer", n, where);
}

StatusOr<double> AsDouble(const std::string& key, const toml::node& n, const std::string& where) {
  if (auto v = n.value_exact<double>()) return *v;
  if (auto v = n.value_exact<int64_t>()) return static_cast<double>(*v);
  return TypeError(key, "a number", n, where);
}

}  // namespace

void ConfigSchema::Bind(const std::string& key, int64_t* field, std::string help) {
  fields_[key] = {"integer", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    TESSERA_ASSIGN_OR_RETURN(*field, AsInt(key, n, where));
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, int* field, std::string help) {
  fields_[key] = {"integer", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    TESSERA_ASSIGN_OR_RETURN(int64_t v, AsInt(key, n, where));
                    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
                      return InvalidArgument("config key '{}' ({}) = {} is out of range", key, where, v);
                    }
                    *field = static_cast<int>(v);
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, double* field, std::string help) {
  fields_[key] = {"float", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    TESSERA_ASSIGN_OR_RETURN(*field, AsDouble(key, n, where));
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, float* field, std::string help) {
  fields_[key] = {"float", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    TESSERA_ASSIGN_OR_RETURN(double v, AsDouble(key, n, where));
                    *field = static_cast<float>(v);
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, bool* field, std::string help) {
  fields_[key] = {"boolean", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    if (auto v = n.value_exact<bool>()) {
                      *field = *v;
                      return Status::Ok();
                    }
                    return TypeError(key, "true or false", n, where);
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::BindIntOrAuto(const std::string& key, int64_t* field, std::string help) {
  fields_[key] = {"integer or \"auto\"", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    if (auto v = n.value_exact<std::string>(); v && *v == "auto") {
                      *field = 0;
                      return Status::Ok();
                    }
                    if (auto v = n.value_exact<int64_t>(); v && *v > 0) {
                      *field = *v;
                      return Status::Ok();
                    }
                    return TypeError(key, "a positive integer or \"auto\"", n, where);
                  },
                  [field] { return *field == 0 ? nlohmann::json("auto") : nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, std::string* field, std::string help) {
  fields_[key] = {"string", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    if (auto v = n.value_exact<std::string>()) {
                      *field = *v;
                      return Status::Ok();
                    }
                    return TypeError(key, "a string", n, where);
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, std::vector<std::string>* field, std::string help) {
  fields_[key] = {"string or array of strings", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    if (auto v = n.value_exact<std::string>()) {
                      *field = {*v};
                      return Status::Ok();
                    }
                    const toml::array* arr = n.as_array();
                    if (arr == nullptr) return TypeError(key, "a string or an array of strings", n, where);
                    std::vector<std::string> out;
                    for (const toml::node& e : *arr) {
                      auto s = e.value_exact<std::string>();
                      if (!s) return TypeError(key, "an array of strings", e, where);
                      out.push_back(*s);
                    }
                    *field = std::move(out);
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, std::vector<int64_t>* field, std::string help) {
  fields_[key] = {"array of integers", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    const toml::array* arr = n.as_array();
                    if (arr == nullptr) return TypeError(key, "an array of integers", n, where);
                    std::vector<int64_t> out;
                    for (const toml::node& e : *arr) {
                      TESSERA_ASSIGN_OR_RETURN(int64_t v, AsInt(key, e, where));
                      out.push_back(v);
                    }
                    *field = std::move(out);
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

void ConfigSchema::Bind(const std::string& key, std::vector<int>* field, std::string help) {
  fields_[key] = {"array of integers", std::move(help),
                  [key, field](const toml::node& n, const std::string& where) -> Status {
                    const toml::array* arr = n.as_array();
                    if (arr == nullptr) return TypeError(key, "an array of integers", n, where);
                    std::vector<int> out;
                    for (const toml::node& e : *arr) {
                      TESSERA_ASSIGN_OR_RETURN(int64_t v, AsInt(key, e, where));
                      out.push_back(static_cast<int>(v));
                    }
                    *field = std::move(out);
                    return Status::Ok();
                  },
                  [field] { return nlohmann::json(*field); }};
}

std::string ConfigSchema::Suggest(const std::string& key) const {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& [name, field] : fields_) {
    size_t d = EditDistance(key, name);
    if (d < best_d) {
      best_d = d;
      best = name;
    }
  }
  if (best_d <= std::max<size_t>(3, key.size() / 3)) return fmt::format(" (did you mean '{}'?)", best);
  return "";
}

Status ConfigSchema::ApplyNode(const std::string& key, const toml::node& node, const std::string& source) {
  auto it = fields_.find(key);
  if (it == fields_.end()) {
    return InvalidArgument("unknown config key '{}' in {}{}", key, source, Suggest(key));
  }
  return it->second.set(node, source);
}

Status ConfigSchema::ApplyTable(const toml::table& table, const std::string& source) {
  std::function<Status(const toml::table&, const std::string&)> walk = [&](const toml::table& t,
                                                                           const std::string& prefix) -> Status {
    for (const auto& [k, node] : t) {
      std::string key = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      if (const toml::table* sub = node.as_table(); sub != nullptr && !fields_.count(key)) {
        TESSERA_RETURN_IF_ERROR(walk(*sub, key));
        continue;
      }
      std::string where = source;
      if (auto line = node.source().begin.line; line > 0) where = fmt::format("{}:{}", source, line);
      TESSERA_RETURN_IF_ERROR(ApplyNode(key, node, where));
    }
    return Status::Ok();
  };
  return walk(table, "");
}

namespace {

// The TOML node of a JSON value (null has none: InvalidArgument).
StatusOr<std::unique_ptr<toml::node>> JsonToToml(const nlohmann::json& j, const std::string& key) {
  switch (j.type()) {
    case nlohmann::json::value_t::boolean: return std::unique_ptr<toml::node>(new toml::value<bool>(j.get<bool>()));
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return std::unique_ptr<toml::node>(new toml::value<int64_t>(j.get<int64_t>()));
    case nlohmann::json::value_t::number_float:
      return std::unique_ptr<toml::node>(new toml::value<double>(j.get<double>()));
    case nlohmann::json::value_t::string:
      return std::unique_ptr<toml::node>(new toml::value<std::string>(j.get<std::string>()));
    case nlohmann::json::value_t::array: {
      auto arr = std::make_unique<toml::array>();
      for (const auto& e : j) {
        TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<toml::node> n, JsonToToml(e, key));
        arr->push_back(std::move(*n));
      }
      return std::unique_ptr<toml::node>(std::move(arr));
    }
    case nlohmann::json::value_t::object: {
      auto table = std::make_unique<toml::table>();
      for (const auto& [k, v] : j.items()) {
        TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<toml::node> n, JsonToToml(v, key.empty() ? k : key + "." + k));
        table->insert(k, std::move(*n));
      }
      return std::unique_ptr<toml::node>(std::move(table));
    }
    default: return InvalidArgument("config key '{}' has a {} value", key, j.type_name());
  }
}

}  // namespace

Status ConfigSchema::ApplyJson(const nlohmann::json& config, const std::string& source) {
  if (!config.is_object()) return InvalidArgument("{}: the config must be a JSON object", source);
  StatusOr<std::unique_ptr<toml::node>> node = JsonToToml(config, "");
  if (!node.ok()) return node.status().WithContext(source);
  return ApplyTable(*(*node)->as_table(), source);
}

Status ConfigSchema::ApplyFile(const std::string& path) {
  toml::table table;
  try {
    table = toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    if (err.source().begin.line == 0) {
      return NotFound("cannot read config file '{}': {}", path, err.description());
    }
    return InvalidArgument("malformed config file {}:{}:{}: {}", path, err.source().begin.line,
                           err.source().begin.column, err.description());
  }
  return ApplyTable(table, path);
}

Status ConfigSchema::ApplyOverride(const std::string& assignment) {
  size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--set '{}' must have the form key=value (e.g. train.steps=50)", assignment);
  }
  std::string key = assignment.substr(0, eq);
  std::string value = assignment.substr(eq + 1);
  std::string source = fmt::format("--set {}", assignment);
  try {
    toml::table parsed = toml::parse("v = " + value);
    if (parsed.contains("v")) return ApplyNode(key, *parsed.get("v"), source);
  } catch (const toml::parse_error&) {
    // Not a TOML value: take it as a bare string below.
  }
  toml::table t;
  t.insert("v", value);  // bare word: a string
  return ApplyNode(key, *t.get("v"), source);
}

nlohmann::json ConfigSchema::ToJson() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, field] : fields_) {
    nlohmann::json* node = &out;
    size_t start = 0;
    while (true) {
      size_t dot = key.find('.', start);
      if (dot == std::string::npos) {
        (*node)[key.substr(start)] = field.get();
        break;
      }
      node = &(*node)[key.substr(start, dot - start)];
      start = dot + 1;
    }
  }
  return out;
}

std::string ConfigSchema::Describe() const {
  std::string out;
  for (const auto& [key, field] : fields_) {
    out += fmt::format("  {:<32} {:<10} {} (now {})\n", key, field.type, field.help, field.get().dump());
  }
  return out;
}

}  // namespace tessera::train
