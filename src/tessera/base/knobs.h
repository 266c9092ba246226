// Environment knobs: every TESSERA_* environment setting is declared once as a
// static Knob object, which registers itself in one process-wide registry.
// Values are read from the environment on first Get() and cached; Set()
// overrides (tests, CLI flags). AllKnobs() lists every knob for
// `TESSERA_DEBUG=INFO` and `tessera info`. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessera::base {

class KnobBase {
 public:
  KnobBase(const char* name, std::string default_text, const char* help);
  virtual ~KnobBase() = default;
  const char* name() const { return name_; }
  const char* help() const { return help_; }
  const std::string& default_text() const { return default_text_; }
  // Raw environment value if set.
  std::optional<std::string> EnvText() const;
  virtual std::string ValueText() const = 0;

 private:
  const char* name_;
  std::string default_text_;
  const char* help_;
};

template <typename T>
class Knob final : public KnobBase {
 public:
  Knob(const char* name, T default_value, const char* help);
  // Current value: override > environment > default. An unparsable
  // environment value logs a warning once and falls back to the default.
  T Get() const;
  void Set(T value);
  void Reset();
  std::string ValueText() const override;

 private:
  T default_;
  mutable std::mutex mu_;
  mutable std::optional<T> cached_;
};

extern template class Knob<int64_t>;
extern template class Knob<double>;
extern template class Knob<bool>;
extern template class Knob<std::string>;

// All registered knobs, sorted by name.
std::vector<const KnobBase*> AllKnobs();
// Multi-line "NAME=value (default ...) — help" listing.
std::string DescribeKnobs();

}  // namespace tessera::base
