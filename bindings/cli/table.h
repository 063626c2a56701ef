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

  // Columns separated by two spaces; the last column is not padded.
  void print(std::ostream& os) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_TABLE_H_
