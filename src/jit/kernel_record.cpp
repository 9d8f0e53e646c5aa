#include "jit/kernel_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "common/log.h"
#include "jit/jit_error.h"
#include "jit/sha256.h"

namespace tileops::jit {
namespace {

constexpr const char* kTag = "tileops-kernel-v1";

bool plain(unsigned char c) {
  return std::isalnum(c) || std::strchr("_-.:/<>()*&+;[]", c) != nullptr;
}

std::string encode(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (c && plain(c)) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string decode(const std::string& s, const std::string& field) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1, lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) throw JitError("field '" + field + "' has a bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string encode_list(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + encode(items[i]);
  return out;
}

std::vector<std::string> decode_list(const std::string& s, const std::string& field) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  for (size_t start = 0;;) {
    const size_t end = s.find(',', start);
    out.push_back(decode(s.substr(start, end == std::string::npos ? std::string::npos : end - start), field));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

void put_u64(Sha256& h, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  h.update({b, 8});
}

}  // namespace

std::string headers_sha256(const HeaderFiles& headers) {
  Sha256 h;
  put_u64(h, headers.size());
  for (const auto& [name, text] : headers) {
    put_u64(h, name.size());
    h.update(name);
    put_u64(h, text.size());
    h.update(text);
  }
  return to_hex(h.finish());
}

std::string record_line(const KernelSource& src) {
  std::vector<std::string> names;
  for (const auto& hdr : src.headers) names.push_back(hdr.first);
  return std::string(kTag) + " name=" + encode(src.name) + " arch=" + encode(src.arch) +
         " expr=" + encode(src.name_expression) + " source=" + encode(src.source) + " headers=" + encode_list(names) +
         " headers_sha256=" + headers_sha256(src.headers) + " options=" + encode_list(src.options);
}

KernelRecord parse_record_line(const std::string& line) {
  std::vector<std::string> words;
  for (size_t start = 0; start < line.size();) {
    size_t end = line.find(' ', start);
    if (end == std::string::npos) end = line.size();
    if (end > start) words.push_back(line.substr(start, end - start));
    start = end + 1;
  }
  if (words.empty() || words[0] != kTag)
    throw JitError(std::string("not a kernel record (it must start with '") + kTag + "')");
  KernelRecord r;
  std::unordered_set<std::string> seen;
  for (size_t i = 1; i < words.size(); ++i) {
    const size_t eq = words[i].find('=');
    if (eq == std::string::npos) throw JitError("'" + words[i] + "' is not field=value");
    const std::string field = words[i].substr(0, eq), value = words[i].substr(eq + 1);
    if (!seen.insert(field).second) throw JitError("field '" + field + "' appears twice");
    if (field == "name") r.name = decode(value, field);
    else if (field == "arch") r.arch = decode(value, field);
    else if (field == "expr") r.name_expression = decode(value, field);
    else if (field == "source") r.source = decode(value, field);
    else if (field == "headers") r.header_names = decode_list(value, field);
    else if (field == "headers_sha256") r.headers_sha256 = value;
    else if (field == "options") r.options = decode_list(value, field);
    else throw JitError("unknown field '" + field + "'");
  }
  for (const char* f : {"name", "arch", "expr", "source", "headers", "headers_sha256", "options"})
    if (!seen.count(f)) throw JitError(std::string("field '") + f + "' is missing");
  if (r.name.empty() || r.arch.empty() || r.name_expression.empty())
    throw JitError("name, arch and expr must not be empty");
  return r;
}

KernelSource source_from_record(const KernelRecord& rec, const HeaderFiles& available) {
  KernelSource src;
  src.name = rec.name;
  src.source = rec.source;
  src.name_expression = rec.name_expression;
  src.options = rec.options;
  src.arch = rec.arch;
  for (const std::string& name : rec.header_names) {
    auto it = std::find_if(available.begin(), available.end(), [&](const auto& h) { return h.first == name; });
    if (it == available.end())
      throw JitError("kernel " + rec.name + " needs header " + name + ", which this library does not have");
    src.headers.push_back(*it);
  }
  if (headers_sha256(src.headers) != rec.headers_sha256)
    throw JitError("kernel " + rec.name + " was recorded by a library with other kernel sources (header digest " +
                   rec.headers_sha256 + ", this library's " + headers_sha256(src.headers) + ")");
  return src;
}

void record_kernel_to(const std::string& path, const KernelSource& src) {
  const std::string line = record_line(src) + "\n";
  static std::mutex mu;
  static auto* seen = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  if (!seen->insert(path + "\n" + line).second) return;
  // O_NOFOLLOW: a symlink planted at the path must not redirect what we append.
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    log::warn_once("record:" + path, "tileops: cannot record kernels to " + path + ": " + std::strerror(errno));
    return;
  }
  ssize_t n;
  do n = ::write(fd, line.data(), line.size());
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(line.size()))
    log::warn_once("record:" + path, "tileops: cannot record kernels to " + path + ": short write");
  ::close(fd);
}

void record_kernel(const KernelSource& src) {
  static const std::string path = [] {
    const char* v = std::getenv("TILEOPS_RECORD_KERNELS");
    return std::string(v ? v : "");
  }();
  if (!path.empty()) record_kernel_to(path, src);
}

}  // namespace tileops::jit
