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

}  // namespace

void Table::print(std::ostream& os) const {
  size_t columns = header_.size();
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> width(columns, 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < columns; ++i) {
      const std::string cell = i < row.size() ? row[i] : std::string();
      line += cell;
      if (i + 1 < columns) line.append(width[i] - display_width(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << '\n';
  };
  emit(header_);
  for (const auto& row : rows_) emit(row);
}

}  // namespace gk::cli
