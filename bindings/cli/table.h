// A plain-text table with aligned columns, for the CLI's human output.
#ifndef GPUKIT_BINDINGS_CLI_TABLE_H_
#define GPUKIT_BINDINGS_CLI_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace gk::cli {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}

  // Adds a row; missing cells print empty, extra cells are kept.
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }

  // Columns separated by two spaces; the last column is not padded. To fit `max_width`, the
  // widest earlier columns shorten their cells in the middle ("…") as far as needed to leave
  // the last column kMinLastColumn, and the last cell wraps at spaces (mid-word where a word
  // is longer than the room) onto lines indented to that column.
  void print(std::ostream& os, size_t max_width = kTerminalWidth) const;

  static constexpr size_t kTerminalWidth = 100;
  // The least room the last column keeps: the columns before it are shortened first, but
  // none below kMinShrunkColumn.
  static constexpr size_t kMinLastColumn = 24;
  static constexpr size_t kMinShrunkColumn = 12;
  // The narrowest the last column wraps to when the others cannot shrink further.
  static constexpr size_t kMinWrapRoom = 12;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// Prints text as lines of at most `width` code points, broken at spaces; continuation lines
// are indented by `indent` spaces.
void print_wrapped(std::ostream& os, const std::string& text, size_t width = Table::kTerminalWidth,
                   size_t indent = 2);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_TABLE_H_
