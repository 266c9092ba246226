// TomlTable: typed, located reads from one toml++ table for the simulator's
// spec files. Every read names the file, line and full key on error
// ("clusters/x.toml:12: device.hbm_gb: expected a number, got string"), and
// Finish() rejects keys nobody read (typos), suggesting the closest known
// one. Not thread-safe; one reader per table, used while loading.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "tessera/base/status.h"

namespace tessera::sim {

// Parses a TOML file; errors name file:line:column.
StatusOr<toml::table> ParseTomlFile(const std::string& path);
// Parses TOML text; `source` names it in errors.
StatusOr<toml::table> ParseTomlText(const std::string& text, const std::string& source);

class TomlTable {
 public:
  // `prefix` is the dotted path of `table` ("" for the root), for messages.
  TomlTable(const toml::table& table, std::string file, std::string prefix);

  bool Has(const std::string& key) const;
  StatusOr<double> Number(const std::string& key) const;              // required
  StatusOr<double> Number(const std::string& key, double fallback) const;
  StatusOr<int64_t> Integer(const std::string& key) const;            // required
  StatusOr<int64_t> Integer(const std::string& key, int64_t fallback) const;
  StatusOr<std::string> String(const std::string& key) const;         // required
  StatusOr<std::string> String(const std::string& key, const std::string& fallback) const;
  StatusOr<bool> Bool(const std::string& key, bool fallback) const;
  StatusOr<TomlTable> Table(const std::string& key) const;            // required sub-table

  // An error located at `key` (or at the table when the key is absent).
  Status Error(const std::string& key, const std::string& message) const;
  // Fails on keys of this table that were never read.
  Status Finish() const;

  const std::string& file() const { return file_; }

 private:
  const toml::node* Find(const std::string& key) const;
  // `fallback` when `key` is absent (marking it known), else read().
  template <typename T, typename Read>
  StatusOr<T> Optional(const std::string& key, const T& fallback, Read read) const {
    if (!Has(key)) {
      read_.insert(key);
      return fallback;
    }
    return read();
  }
  std::string Where(const toml::node* node) const;
  std::string Full(const std::string& key) const;

  const toml::table* table_;
  std::string file_;
  std::string prefix_;
  mutable std::set<std::string> read_;
};

}  // namespace tessera::sim
