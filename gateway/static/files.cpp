#include "gateway/static/files.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace tally::gateway {

namespace {

bool plain_relative(std::string_view name) {
  if (name.empty() || name.find('\\') != std::string_view::npos) return false;
  for (std::size_t from = 0; from <= name.size();) {
    const auto slash = std::min(name.find('/', from), name.size());
    const auto part = name.substr(from, slash - from);
    if (part.empty() || part.front() == '.') return false;
    from = slash + 1;
  }
  return true;
}

}  // namespace

std::string_view content_type_of(std::string_view name) {
  struct by_extension {
    std::string_view extension, type;
  };
  static constexpr by_extension types[] = {
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".json", "application/json"},
      {".yaml", "application/yaml; charset=utf-8"},
      {".ico", "image/x-icon"},
  };
  for (const auto& t : types)
    if (name.ends_with(t.extension)) return t.type;
  return "application/octet-stream";
}

std::optional<static_files::file> static_files::find(std::string_view name) const {
  if (!plain_relative(name)) return std::nullopt;
  constexpr std::string_view console = "console/";
  if (!console_dir_.empty() && name.starts_with(console)) {
    const auto path = console_dir_ + "/" + std::string(name.substr(console.size()));
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream body;
    body << in.rdbuf();
    return file{content_type_of(name), body.str()};
  }
  for (const auto& f : embedded_files())
    if (f.name == name) return file{content_type_of(name), std::string(f.data)};
  return std::nullopt;
}

}  // namespace tally::gateway
