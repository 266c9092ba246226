#include "tessera/base/knobs.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "tessera/base/logging.h"

namespace tessera::base {
namespace {

std::mutex& RegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::vector<const KnobBase*>& Registry() {
  static std::vector<const KnobBase*> knobs;
  return knobs;
}

bool Parse(const std::string& s, int64_t* out) {
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  if (end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}
bool Parse(const std::string& s, double* out) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}
bool Parse(const std::string& s, bool* out) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "1" || l == "true" || l == "yes" || l == "on") { *out = true; return true; }
  if (l == "0" || l == "false" || l == "no" || l == "off") { *out = false; return true; }
  return false;
}
bool Parse(const std::string& s, std::string* out) {
  *out = s;
  return true;
}

std::string Text(int64_t v) { return std::to_string(v); }
std::string Text(double v) { return fmt::format("{}", v); }
std::string Text(bool v) { return v ? "1" : "0"; }
std::string Text(const std::string& v) { return v; }

}  // namespace

KnobBase::KnobBase(const char* name, std::string default_text, const char* help)
    : name_(name), default_text_(std::move(default_text)), help_(help) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().push_back(this);
}

std::optional<std::string> KnobBase::EnvText() const {
  const char* v = std::getenv(name_);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

template <typename T>
Knob<T>::Knob(const char* name, T default_value, const char* help)
    : KnobBase(name, Text(default_value), help), default_(std::move(default_value)) {}

template <typename T>
T Knob<T>::Get() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!cached_) {
    T value = default_;
    if (auto env = EnvText()) {
      if (!Parse(*env, &value)) {
        TLOG(WARN, "environment {}='{}' is not a valid value; using default {}", name(), *env,
             Text(default_));
        value = default_;
      }
    }
    cached_ = value;
  }
  return *cached_;
}

template <typename T>
void Knob<T>::Set(T value) {
  std::lock_guard<std::mutex> lock(mu_);
  cached_ = std::move(value);
}

template <typename T>
void Knob<T>::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  cached_.reset();
}

template <typename T>
std::string Knob<T>::ValueText() const {
  return Text(Get());
}

template class Knob<int64_t>;
template class Knob<double>;
template class Knob<bool>;
template class Knob<std::string>;

std::vector<const KnobBase*> AllKnobs() {
  std::vector<const KnobBase*> out;
  {
    std::lock_guard<std::mutex> lock(RegistryMutex());
    out = Registry();
  }
  std::sort(out.begin(), out.end(),
            [](const KnobBase* a, const KnobBase* b) { return std::string_view(a->name()) < b->name(); });
  return out;
}

std::string DescribeKnobs() {
  std::string out;
  for (const KnobBase* k : AllKnobs()) {
    out += fmt::format("  {}={}{} — {}\n", k->name(), k->ValueText(),
                       k->EnvText() ? " (from environment)" : fmt::format(" (default {})", k->default_text()),
                       k->help());
  }
  return out;
}

}  // namespace tessera::base
