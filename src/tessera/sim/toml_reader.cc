#include "tessera/sim/toml_reader.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace tessera::sim {
namespace {

std::string TypeName(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

StatusOr<toml::table> ParseTomlText(const std::string& text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& err) {
    return InvalidArgument("malformed TOML {}:{}:{}: {}", source, err.source().begin.line,
                           err.source().begin.column, err.description());
  }
}

StatusOr<toml::table> ParseTomlFile(const std::string& path) {
  try {
    return toml::parse_file(path);
  } catch (const toml::parse_error& err) {
    if (err.source().begin.line == 0) {
      return NotFound("cannot read spec file '{}': {}", path, err.description());
    }
    return InvalidArgument("malformed TOML {}:{}:{}: {}", path, err.source().begin.line,
                           err.source().begin.column, err.description());
  }
}

TomlTable::TomlTable(const toml::table& table, std::string file, std::string prefix)
    : table_(&table), file_(std::move(file)), prefix_(std::move(prefix)) {}

bool TomlTable::Has(const std::string& key) const { return table_->contains(key); }

const toml::node* TomlTable::Find(const std::string& key) const {
  read_.insert(key);
  return table_->get(key);
}

std::string TomlTable::Full(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

std::string TomlTable::Where(const toml::node* node) const {
  const toml::source_region& src = node != nullptr ? node->source() : table_->source();
  if (src.begin.line == 0) return file_;
  return fmt::format("{}:{}", file_, src.begin.line);
}

Status TomlTable::Error(const std::string& key, const std::string& message) const {
  return InvalidArgument("{}: {}: {}", Where(table_->get(key)), Full(key), message);
}

StatusOr<double> TomlTable::Number(const std::string& key) const {
  const toml::node* n = Find(key);
  if (n == nullptr) return InvalidArgument("{}: missing required key '{}'", Where(nullptr), Full(key));
  double v = 0;
  if (auto i = n->value_exact<int64_t>()) {
    v = static_cast<double>(*i);
  } else if (auto d = n->value_exact<double>()) {
    v = *d;
  } else {
    return InvalidArgument("{}: {}: expected a number, got {}", Where(n), Full(key), TypeName(*n));
  }
  if (!std::isfinite(v)) return InvalidArgument("{}: {}: must be finite", Where(n), Full(key));
  return v;
}

StatusOr<double> TomlTable::Number(const std::string& key, double fallback) const {
  return Optional(key, fallback, [&] { return Number(key); });
}

StatusOr<int64_t> TomlTable::Integer(const std::string& key) const {
  const toml::node* n = Find(key);
  if (n == nullptr) return InvalidArgument("{}: missing required key '{}'", Where(nullptr), Full(key));
  auto i = n->value_exact<int64_t>();
  if (!i) return InvalidArgument("{}: {}: expected an integer, got {}", Where(n), Full(key), TypeName(*n));
  return *i;
}

StatusOr<int64_t> TomlTable::Integer(const std::string& key, int64_t fallback) const {
  return Optional(key, fallback, [&] { return Integer(key); });
}

StatusOr<std::string> TomlTable::String(const std::string& key) const {
  const toml::node* n = Find(key);
  if (n == nullptr) return InvalidArgument("{}: missing required key '{}'", Where(nullptr), Full(key));
  auto s = n->value_exact<std::string>();
  if (!s) return InvalidArgument("{}: {}: expected a string, got {}", Where(n), Full(key), TypeName(*n));
  return *s;
}

StatusOr<std::string> TomlTable::String(const std::string& key, const std::string& fallback) const {
  return Optional(key, fallback, [&] { return String(key); });
}

StatusOr<bool> TomlTable::Bool(const std::string& key, bool fallback) const {
  return Optional(key, fallback, [&]() -> StatusOr<bool> {
    const toml::node* n = Find(key);
    auto b = n->value_exact<bool>();
    if (!b) return InvalidArgument("{}: {}: expected true or false, got {}", Where(n), Full(key), TypeName(*n));
    return *b;
  });
}

StatusOr<TomlTable> TomlTable::Table(const std::string& key) const {
  const toml::node* n = Find(key);
  if (n == nullptr) return InvalidArgument("{}: missing required table [{}]", Where(nullptr), Full(key));
  const toml::table* t = n->as_table();
  if (t == nullptr) return InvalidArgument("{}: {}: expected a table, got {}", Where(n), Full(key), TypeName(*n));
  return TomlTable(*t, file_, Full(key));
}

Status TomlTable::Finish() const {
  for (const auto& [k, node] : *table_) {
    std::string key(k.str());
    if (read_.count(key)) continue;
    std::string best;
    size_t best_d = 3;
    for (const std::string& known : read_) {
      size_t d = EditDistance(key, known);
      if (d < best_d) best_d = d, best = known;
    }
    std::string hint = best.empty() ? "" : fmt::format(" (did you mean '{}'?)", Full(best));
    return InvalidArgument("{}: unknown key '{}'{}", Where(&node), Full(key), hint);
  }
  return Status::Ok();
}

}  // namespace tessera::sim
