#include "rlx/settings.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace rlx {

namespace {

bool parse(std::string_view s, bool& out) {
  for (std::string_view t : {"1", "true", "on", "yes"})
    if (s == t) return out = true, true;
  for (std::string_view f : {"0", "false", "off", "no"})
    if (s == f) return out = false, true;
  return false;
}

template <typename Int>
bool parse(std::string_view s, Int& out) {
  std::string str(s);
  char* end = nullptr;
  long long v = std::strtoll(str.c_str(), &end, 10);
  if (str.empty() || *end != '\0') return false;
  out = Int(v);
  return true;
}

bool parse(std::string_view s, std::string& out) {
  out = s;
  return true;
}

std::string text(bool v) { return v ? "1" : "0"; }
std::string text(int64_t v) { return std::to_string(v); }
std::string text(int v) { return std::to_string(v); }
std::string text(const std::string& v) { return v; }

// An unset or empty variable keeps the default; one that does not parse says so once and
// keeps it too (a typo in the environment must not stop a program that never asked).
template <typename T>
void from_env(const char* var, T& field) {
  const char* v = std::getenv(var);
  if (!v || !*v) return;
  T parsed = field;
  if (parse(v, parsed))
    field = parsed;
  else
    std::fprintf(stderr, "rlx: ignoring %s='%s' (expected a value like '%s')\n", var, v,
                 text(field).c_str());
}

Settings from_environment() {
  Settings s;
#define RLX_SETTING_READ(type, field, var, def, doc) from_env(var, s.field);
  RLX_SETTINGS(RLX_SETTING_READ)
#undef RLX_SETTING_READ
  return s;
}

}  // namespace

bool Settings::debug_has(const char* word) const {
  std::string_view d(debug);
  return d == "1" || d == "all" || (!d.empty() && d.find(word) != std::string_view::npos);
}

Settings& settings() {
  static Settings s = from_environment();
  return s;
}

std::vector<SettingInfo> setting_table() {
  const Settings& s = settings();
  std::vector<SettingInfo> rows;
#define RLX_SETTING_ROW(type, field, var, def, doc) \
  rows.push_back({#field, var, doc, text(type(def)), text(s.field)});
  RLX_SETTINGS(RLX_SETTING_ROW)
#undef RLX_SETTING_ROW
  return rows;
}

}  // namespace rlx
