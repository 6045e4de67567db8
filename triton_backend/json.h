// A small JSON reader for the one document this backend reads: the model config Triton
// serialises (TRITONSERVER_MessageSerializeToJson). Values are kept as parsed; numbers
// also where protobuf's JSON writes 64-bit integers as strings.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace deploybench {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::map<std::string, Json> members;

  // The member `key` of an object; a null value where there is none.
  const Json& operator[](const std::string& key) const {
    static const Json none;
    auto found = members.find(key);
    return found == members.end() ? none : found->second;
  }
  int64_t integer() const {
    if (kind == kNumber) return static_cast<int64_t>(number);
    if (kind == kString) return std::strtoll(text.c_str(), nullptr, 10);
    return 0;
  }
  const std::string& string() const { return text; }

  static Json parse(const std::string& source) {
    size_t at = 0;
    Json value = read(source, at);
    skip(source, at);
    if (at != source.size()) fail(source, at, "text after the value");
    return value;
  }

 private:
  [[noreturn]] static void fail(const std::string& s, size_t at, const char* what) {
    throw std::runtime_error("model config JSON: " + std::string(what) + " at offset " +
                             std::to_string(at) + " of " + std::to_string(s.size()));
  }
  static void skip(const std::string& s, size_t& at) {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\n' || s[at] == '\r' || s[at] == '\t'))
      ++at;
  }
  static void expect(const std::string& s, size_t& at, const char* word) {
    for (const char* c = word; *c; ++c, ++at)
      if (at >= s.size() || s[at] != *c) fail(s, at, "an unknown word");
  }
  static std::string read_string(const std::string& s, size_t& at) {
    std::string out;
    ++at;  // the opening quote
    while (at < s.size() && s[at] != '"') {
      char c = s[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= s.size()) break;
      char e = s[at++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {  // names and values here are ASCII: keep the code point's low byte
          if (at + 4 > s.size()) fail(s, at, "a short \\u escape");
          out += static_cast<char>(std::strtol(s.substr(at, 4).c_str(), nullptr, 16) & 0x7f);
          at += 4;
          break;
        }
        default: out += e;  // \" \\ \/
      }
    }
    if (at >= s.size()) fail(s, at, "an unterminated string");
    ++at;  // the closing quote
    return out;
  }
  static Json read(const std::string& s, size_t& at) {
    skip(s, at);
    if (at >= s.size()) fail(s, at, "a missing value");
    Json v;
    char c = s[at];
    if (c == '{') {
      v.kind = kObject;
      ++at;
      skip(s, at);
      if (at < s.size() && s[at] == '}') return ++at, v;
      while (true) {
        skip(s, at);
        if (at >= s.size() || s[at] != '"') fail(s, at, "a missing member name");
        std::string key = read_string(s, at);
        skip(s, at);
        if (at >= s.size() || s[at] != ':') fail(s, at, "a missing ':'");
        ++at;
        v.members[key] = read(s, at);
        skip(s, at);
        if (at < s.size() && s[at] == ',') { ++at; continue; }
        if (at < s.size() && s[at] == '}') return ++at, v;
        fail(s, at, "a missing ',' or '}'");
      }
    }
    if (c == '[') {
      v.kind = kArray;
      ++at;
      skip(s, at);
      if (at < s.size() && s[at] == ']') return ++at, v;
      while (true) {
        v.items.push_back(read(s, at));
        skip(s, at);
        if (at < s.size() && s[at] == ',') { ++at; continue; }
        if (at < s.size() && s[at] == ']') return ++at, v;
        fail(s, at, "a missing ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = kString;
      v.text = read_string(s, at);
      return v;
    }
    if (c == 't') return expect(s, at, "true"), v.kind = kBool, v.boolean = true, v;
    if (c == 'f') return expect(s, at, "false"), v.kind = kBool, v;
    if (c == 'n') return expect(s, at, "null"), v;
    char* end = nullptr;
    v.number = std::strtod(s.c_str() + at, &end);
    if (end == s.c_str() + at) fail(s, at, "an unexpected character");
    v.kind = kNumber;
    at = end - s.c_str();
    return v;
  }
};

}  // namespace deploybench
