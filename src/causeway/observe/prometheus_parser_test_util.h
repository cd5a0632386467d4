// A strict reader of the Prometheus text exposition format (0.0.4), for
// the tests of /metrics: every line is a comment (# HELP, # TYPE), blank,
// or a sample `name{label="value",...} number`; a family is typed before
// its samples and only once; counters end in _total; a histogram's
// buckets have increasing `le`, counts that never go down, and a +Inf
// bucket equal to its _count. Anything else is an error naming the line.
#ifndef CAUSEWAY_OBSERVE_PROMETHEUS_PARSER_TEST_UTIL_H_
#define CAUSEWAY_OBSERVE_PROMETHEUS_PARSER_TEST_UTIL_H_

#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace causeway::observe::testing {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PrometheusText {
  std::map<std::string, std::string> types;  // Family -> type.
  std::vector<PrometheusSample> samples;

  // The value of the one sample `name` with exactly `labels`; NaN if none.
  double Value(const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const {
    for (const PrometheusSample& sample : samples) {
      if (sample.name == name && sample.labels == labels) return sample.value;
    }
    return std::numeric_limits<double>::quiet_NaN();
  }
  size_t Count(const std::string& name) const {
    size_t n = 0;
    for (const PrometheusSample& sample : samples) n += sample.name == name;
    return n;
  }
};

namespace internal {

inline bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         c == ':';
}
inline bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

inline bool ValidName(const std::string& name) {
  if (name.empty() || !IsNameStart(name[0])) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

inline bool ParseNumber(const std::string& text, double* out) {
  if (text == "+Inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (text.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// The family a sample belongs to, given the declared types.
inline std::string FamilyOf(const std::string& name,
                            const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() &&
        name.compare(name.size() - s.size(), s.size(), s) == 0) {
      const std::string base = name.substr(0, name.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return name;
}

}  // namespace internal

inline absl::StatusOr<PrometheusText> ParsePrometheusText(
    const std::string& text, const std::string& required_prefix) {
  using internal::ParseNumber;
  using internal::ValidName;
  PrometheusText out;
  std::set<std::string> families_with_samples;
  if (!text.empty() && text.back() != '\n') {
    return absl::InvalidArgumentError("the text does not end with a newline");
  }
  int line_number = 0;
  for (absl::string_view view : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string line(view);
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_number, ": ", what, ": '", line, "'"));
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::vector<std::string> words =
          absl::StrSplit(line, absl::MaxSplits(' ', 3));
      if (words.size() >= 3 && words[1] == "TYPE") {
        if (words.size() != 4) return error("# TYPE needs a name and a type");
        const std::string& type = words[3];
        if (type != "counter" && type != "gauge" && type != "histogram" &&
            type != "summary" && type != "untyped") {
          return error("unknown type");
        }
        if (!ValidName(words[2])) return error("bad metric name");
        if (out.types.contains(words[2])) return error("typed twice");
        if (families_with_samples.contains(words[2])) {
          return error("typed after its samples");
        }
        out.types[words[2]] = type;
      } else if (words.size() >= 3 && words[1] == "HELP") {
        if (!ValidName(words[2])) return error("bad metric name");
      }
      continue;
    }
    PrometheusSample sample;
    size_t i = 0;
    while (i < line.size() && internal::IsNameChar(line[i])) ++i;
    sample.name = line.substr(0, i);
    if (!ValidName(sample.name)) return error("bad metric name");
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t start = i;
        while (i < line.size() && internal::IsNameChar(line[i])) ++i;
        const std::string label = line.substr(start, i - start);
        if (!ValidName(label) || label.find(':') != std::string::npos) {
          return error("bad label name");
        }
        if (i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          return error("a label needs =\"value\"");
        }
        i += 2;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          const char c = line[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) return error("bad escape");
            const char e = line[i++];
            if (e == 'n') {
              value += '\n';
            } else if (e == '\\' || e == '"') {
              value += e;
            } else {
              return error("bad escape");
            }
          } else {
            value += c;
          }
        }
        if (!closed) return error("unterminated label value");
        if (sample.labels.contains(label)) return error("label given twice");
        sample.labels[label] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return error("unterminated labels");
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return error("no value");
    std::vector<std::string> rest = absl::StrSplit(line.substr(i + 1), ' ');
    if (rest.empty() || rest.size() > 2 ||
        !ParseNumber(rest[0], &sample.value)) {
      return error("bad value");
    }
    if (sample.name.rfind(required_prefix, 0) != 0) {
      return error(absl::StrCat("the name does not start with ",
                                required_prefix));
    }
    const std::string family = internal::FamilyOf(sample.name, out.types);
    auto type = out.types.find(family);
    if (type == out.types.end()) return error("a sample of an untyped family");
    if (type->second == "counter" &&
        (family.size() < 6 ||
         family.compare(family.size() - 6, 6, "_total") != 0)) {
      return error("a counter's name must end in _total");
    }
    if (type->second == "histogram" && sample.name == family + "_bucket" &&
        !sample.labels.contains("le")) {
      return error("a bucket without le");
    }
    families_with_samples.insert(family);
    out.samples.push_back(std::move(sample));
  }
  // Histograms: per family (and other labels), buckets in order.
  for (const auto& [family, type] : out.types) {
    if (type != "histogram") continue;
    double last_le = -std::numeric_limits<double>::infinity();
    double last_count = -1;
    bool inf = false;
    double inf_count = 0;
    for (const PrometheusSample& sample : out.samples) {
      if (sample.name != family + "_bucket") continue;
      double le = 0;
      if (!ParseNumber(sample.labels.at("le"), &le)) {
        return absl::InvalidArgumentError(
            absl::StrCat(family, ": a bucket's le is not a number"));
      }
      if (le <= last_le) {
        return absl::InvalidArgumentError(
            absl::StrCat(family, ": bucket bounds do not increase"));
      }
      if (sample.value < last_count) {
        return absl::InvalidArgumentError(
            absl::StrCat(family, ": bucket counts go down"));
      }
      last_le = le;
      last_count = sample.value;
      if (std::isinf(le)) {
        inf = true;
        inf_count = sample.value;
      }
    }
    if (!inf) {
      return absl::InvalidArgumentError(
          absl::StrCat(family, ": no +Inf bucket"));
    }
    if (out.Count(family + "_count") != 1 ||
        out.Value(family + "_count") != inf_count) {
      return absl::InvalidArgumentError(
          absl::StrCat(family, ": _count differs from the +Inf bucket"));
    }
    if (out.Count(family + "_sum") != 1) {
      return absl::InvalidArgumentError(absl::StrCat(family, ": no _sum"));
    }
  }
  return out;
}

}  // namespace causeway::observe::testing

#endif  // CAUSEWAY_OBSERVE_PROMETHEUS_PARSER_TEST_UTIL_H_
