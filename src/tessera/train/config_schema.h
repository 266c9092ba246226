// ConfigSchema: binds dotted TOML keys ("train.steps") to typed fields of
// config structs, then applies a TOML document and `key=value` overrides to
// them. Every key in the document must be bound (unknown keys are errors
// that suggest the closest known key); every value must have the bound
// type (errors name the key, the expected type and where the value came
// from). ToJson() dumps the resolved values for run records.
// Not thread-safe; build, apply, then read the structs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/base/status.h"

namespace toml {
inline namespace v3 {
class node;
class table;
}  // namespace v3
}  // namespace toml

namespace tessera::train {

class ConfigSchema {
 public:
  void Bind(const std::string& key, int64_t* field, std::string help);
  void Bind(const std::string& key, int* field, std::string help);
  void Bind(const std::string& key, double* field, std::string help);
  void Bind(const std::string& key, float* field, std::string help);
  void Bind(const std::string& key, bool* field, std::string help);
  void Bind(const std::string& key, std::string* field, std::string help);
  void Bind(const std::string& key, std::vector<std::string>* field, std::string help);
  void Bind(const std::string& key, std::vector<int64_t>* field, std::string help);
  void Bind(const std::string& key, std::vector<int>* field, std::string help);
  // An integer, or the string "auto" (stored as 0; written back as "auto").
  void BindIntOrAuto(const std::string& key, int64_t* field, std::string help);

  // Applies every key of a parsed TOML file (`source` names it in errors).
  Status ApplyFile(const std::string& path);
  Status ApplyTable(const toml::table& table, const std::string& source);
  // Applies a nested JSON object as ToJson() writes it (a config stored in
  // a run record or a checkpoint).
  Status ApplyJson(const nlohmann::json& config, const std::string& source);
  // Applies one "dotted.key=value" override; the value is parsed as a TOML
  // value ("5", "true", "1e-3", "[1, 2]", "\"s\"") or else taken as a bare string.
  Status ApplyOverride(const std::string& assignment);

  nlohmann::json ToJson() const;
  // "key (type) — help" lines, for --help-config.
  std::string Describe() const;
  bool Has(const std::string& key) const { return fields_.count(key) > 0; }

 private:
  struct Field {
    std::string type;
    std::string help;
    std::function<Status(const toml::node&, const std::string& where)> set;
    std::function<nlohmann::json()> get;
  };
  Status ApplyNode(const std::string& key, const toml::node& node, const std::string& source);
  std::string Suggest(const std::string& key) const;

  std::map<std::string, Field> fields_;
};

}  // namespace tessera::train
