#include "table.h"

#include <algorithm>

namespace gk::cli {

namespace {

// Display width of a UTF-8 string: counts code points, not bytes.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) {
    if ((c & 0xC0) != 0x80) ++n;
  }
  return n;
}

// The byte offset of code point `n` of s (s.size() when s has fewer).
size_t offset_of(const std::string& s, size_t n) {
  size_t seen = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) return i;
  }
  return s.size();
}

// s within `width` code points: its middle replaced by "…" when it is longer.
std::string shorten_middle(const std::string& s, size_t width) {
  const size_t n = display_width(s);
  if (n <= width || width < 3) return s;
  const size_t head = (width - 1) / 2, tail = width - 1 - head;
  return s.substr(0, offset_of(s, head)) + "\u2026" + s.substr(offset_of(s, n - tail));
}

// Splits text into lines of at most `room` code points, breaking at the last space that fits.
std::vector<std::string> wrap(const std::string& text, size_t room) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (display_width(rest) > room) {
    const size_t limit = offset_of(rest, room);
    size_t cut = rest.rfind(' ', limit);
    const bool at_space = cut != std::string::npos && cut > 0;
    if (!at_space) cut = limit;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(at_space ? cut + 1 : cut);
  }
  lines.push_back(rest);
  return lines;
}

}  // namespace

void Table::print(std::ostream& os, size_t max_width) const {
  size_t columns = header_.size();
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  if (columns == 0) return;
  std::vector<size_t> width(columns, 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  // Columns before the last narrow, widest first, until the last keeps kMinLastColumn;
  // their longer cells lose their middle (a path keeps its start and its file name).
  auto last_start_now = [&] {
    size_t start = 0;
    for (size_t i = 0; i + 1 < columns; ++i) start += width[i] + 2;
    return start;
  };
  const size_t last_room = std::min(kMinLastColumn, width[columns - 1]);
  while (last_start_now() + last_room > max_width) {
    const auto widest = std::max_element(width.begin(), width.end() - 1);
    if (widest == width.end() - 1 || *widest <= kMinShrunkColumn) break;
    --*widest;
  }
  const size_t last_start = last_start_now();
  // Past the width only when even the shortened columns leave the last one no room.
  const size_t room = max_width > last_start + kMinWrapRoom ? max_width - last_start : kMinWrapRoom;

  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i + 1 < columns; ++i) {
      const std::string cell = shorten_middle(i < row.size() ? row[i] : std::string(), width[i]);
      line += cell;
      line.append(width[i] - display_width(cell) + 2, ' ');
    }
    const std::string last = columns <= row.size() ? row[columns - 1] : std::string();
    const std::vector<std::string> parts = wrap(last, room);
    for (size_t k = 0; k < parts.size(); ++k) {
      if (k) line = std::string(last_start, ' ');
      line += parts[k];
      while (!line.empty() && line.back() == ' ') line.pop_back();
      os << line << '\n';
    }
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
}

void print_wrapped(std::ostream& os, const std::string& text, size_t width, size_t indent) {
  const std::vector<std::string> first = wrap(text, width);
  os << first[0] << '\n';
  if (first.size() == 1) return;
  // The rest is wrapped again to the narrower room the indent leaves.
  size_t next = first[0].size();
  if (next < text.size() && text[next] == ' ') ++next;  // the space the line broke at
  const std::string rest = text.substr(next);
  for (const std::string& line : wrap(rest, width > indent + 20 ? width - indent : 20)) {
    os << std::string(indent, ' ') << line << '\n';
  }
}

}  // namespace gk::cli
