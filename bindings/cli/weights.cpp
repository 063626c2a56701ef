#include "weights.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

#include "op_signatures.h"
#include "table.h"

namespace gk::cli {
namespace {

constexpr size_t kTableColumns = 100;

// One tensor as gk_weights_info describes it, its strings copied.
struct WeightRow {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  uint64_t bytes = 0;
  std::string file;
  uint64_t offset = 0;
};

// Display width as table.cpp counts it (code points).
size_t width_of(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `n` code points of `s`.
std::string first_points(const std::string& s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == n) break;
  }
  return s.substr(0, i);
}

// The last `n` code points of `s`.
std::string last_points(const std::string& s, size_t n) {
  const size_t total = width_of(s);
  if (n >= total) return s;
  size_t skip = total - n, i = 0;
  for (size_t seen = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && seen++ == skip) break;
  }
  return s.substr(i);
}

// `s` cut to `width` columns: names keep their head and tail around "…" (the layer number
// and the tensor's role both matter); other text keeps its head.
std::string shorten(const std::string& s, size_t width, bool middle) {
  if (width_of(s) <= width) return s;
  if (width <= 1) return "…";
  if (!middle) return first_points(s, width - 1) + "…";
  const size_t tail = (width - 1) / 2 + (width - 1) % 2;
  return first_points(s, width - 1 - tail) + "…" + last_points(s, tail);
}

// Control characters (a chat template's newlines) as escapes, so a value stays on one line.
std::string one_line(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

// 1023 → "1023 B", 1536 → "1.5 KiB", … 1024-based, one decimal.
std::string size_string(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

// The dtype's name; block-quantized ones included ("q4_k").
std::string dtype_string(int32_t dtype) {
  const char* name = gk_dtype_name(dtype);
  return name && *name ? name : "dtype " + std::to_string(dtype);
}

// A metadata value in a table cell: scalars as they are, short arrays inline, long ones
// (a tokenizer's vocabulary) as "array of N strings".
std::string metadata_cell(const nlohmann::ordered_json& v) {
  if (v.is_string()) return one_line(v.get<std::string>());
  if (v.is_object()) return "object of " + std::to_string(v.size()) + " keys";
  if (!v.is_array()) return json_text(v);
  const std::string inline_text = json_text(v);
  if (v.size() <= 8 && width_of(inline_text) <= 48) return one_line(inline_text);
  std::string kind = "values";
  bool all_strings = true, all_ints = true, all_numbers = true, all_bools = true, all_arrays = true;
  for (const auto& e : v) {
    all_strings &= e.is_string();
    all_ints &= e.is_number_integer();
    all_numbers &= e.is_number();
    all_bools &= e.is_boolean();
    all_arrays &= e.is_array();
  }
  if (all_strings) {
    kind = "strings";
  } else if (all_ints) {
    kind = "integers";
  } else if (all_numbers) {
    kind = "numbers";
  } else if (all_bools) {
    kind = "booleans";
  } else if (all_arrays) {
    kind = "arrays";
  }
  return "array of " + std::to_string(v.size()) + " " + kind;
}

bool is_floating(int32_t dtype) {
  return dtype == GK_DTYPE_F32 || dtype == GK_DTYPE_F64 || dtype == GK_DTYPE_F16 ||
         dtype == GK_DTYPE_BF16;
}

// Whether gk_weights_load converts a tensor stored as `stored` to `target`: floating-point
// dtypes to each other, block-quantized ones to f32, f16 and bf16; the others stay as
// stored.
bool converts(int32_t stored, int32_t target) {
  if (!target || stored == target) return false;
  if (is_floating(stored)) return true;
  return gk_dtype_block(stored, nullptr) > 1 && is_floating(target) && target != GK_DTYPE_F64;
}

// gk_weights_load's progress on a terminal: one line on stderr, redrawn at most ten times a
// second.
struct ProgressLine {
  std::string label;
  std::chrono::steady_clock::time_point last{};
  bool drawn = false;
};

void draw_progress(void* user_data, uint64_t done, uint64_t total) {
  auto* p = static_cast<ProgressLine*>(user_data);
  const auto now = std::chrono::steady_clock::now();
  if (done < total && p->drawn && now - p->last < std::chrono::milliseconds(100)) return;
  p->last = now;
  p->drawn = true;
  const double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int filled = static_cast<int>(frac * 24);
  std::fprintf(stderr, "\r%s  [%s%s] %5.1f%%  %s / %s   ", p->label.c_str(),
               std::string(filled, '#').c_str(), std::string(24 - filled, '.').c_str(),
               frac * 100.0, size_string(done).c_str(), size_string(total).c_str());
  std::fflush(stderr);
}

struct LoadReport {
  int32_t device = 0;
  std::string device_text;
  int32_t dtype = 0;   // 0: as stored
  uint64_t bytes = 0;  // the loaded copies (or mappings)
  double seconds = 0;
};

// Makes every tensor available on the device as the dtype (gk_weights_load: what does not
// convert stays as stored) and measures it.
LoadReport load_all(gk_runtime* rt, gk_weights* w, const std::vector<WeightRow>& rows,
                    const WeightsOptions& o, const ProgressLine& progress) {
  LoadReport r;
  r.device = o.device.empty() ? gk_device_default(rt) : parse_device(rt, o.device);
  gk_device_props props{};
  props.struct_size = sizeof props;
  check(gk_device_get_props(rt, r.device, &props), "gk_device_get_props");
  r.device_text =
      std::to_string(r.device) + " (" + kind_string(props.kind) + ", " + props.name + ")";
  if (!o.dtype.empty()) {
    r.dtype = parse_dtype(o.dtype);
    if (r.dtype != GK_DTYPE_F32 && r.dtype != GK_DTYPE_F16 && r.dtype != GK_DTYPE_BF16 &&
        r.dtype != GK_DTYPE_F64) {
      throw std::invalid_argument("--dtype " + o.dtype + ": give f32, f16, bf16 or f64");
    }
  }
  for (const auto& row : rows) {
    if (converts(row.dtype, r.dtype)) {
      int64_t elements = 1;
      for (int64_t n : row.shape) elements *= n;
      r.bytes += static_cast<uint64_t>(elements) * gk_dtype_size(r.dtype);
    } else {
      r.bytes += row.bytes;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  check(gk_weights_load(w, r.device, r.dtype, nullptr), "gk_weights_load");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (progress.drawn) std::fputc('\n', stderr);
  return r;
}

void print_weights_table(const std::string& path, const std::string& format,
                         const std::vector<WeightRow>& rows, const nlohmann::ordered_json& metadata,
                         const LoadReport* loaded) {
  uint64_t total = 0;
  std::map<std::string, std::pair<size_t, uint64_t>> by_dtype;             // name -> (count, bytes)
  std::vector<std::pair<std::string, std::pair<size_t, uint64_t>>> files;  // in order
  for (const auto& r : rows) {
    total += r.bytes;
    auto& d = by_dtype[dtype_string(r.dtype)];
    ++d.first;
    d.second += r.bytes;
    if (files.empty() || files.back().first != r.file) files.push_back({r.file, {0, 0}});
    ++files.back().second.first;
    files.back().second.second += r.bytes;
  }
  const std::string summary = ": " + format + ", " + std::to_string(rows.size()) + " tensors, " +
                              size_string(total) + " in " + std::to_string(files.size()) +
                              (files.size() == 1 ? " file" : " files");
  std::cout << shorten(path, kTableColumns - std::min(width_of(summary), kTableColumns / 2), true)
            << summary << "\n\n";

  // Columns: NAME (what is left of 100), DTYPE, SHAPE, BYTES, two spaces between.
  std::vector<std::array<std::string, 4>> cells;
  size_t dtype_w = 5, shape_w = 5, bytes_w = 5;
  for (const auto& r : rows) {
    std::array<std::string, 4> c = {r.name, dtype_string(r.dtype),
                                    shorten(shape_string(r.shape), 28, false),
                                    size_string(r.bytes)};
    dtype_w = std::max(dtype_w, width_of(c[1]));
    shape_w = std::max(shape_w, width_of(c[2]));
    bytes_w = std::max(bytes_w, width_of(c[3]));
    cells.push_back(std::move(c));
  }
  const size_t name_w = kTableColumns - (dtype_w + shape_w + bytes_w + 3 * 2);
  Table t({"NAME", "DTYPE", "SHAPE", "BYTES"});
  for (auto& c : cells) t.add_row({shorten(one_line(c[0]), name_w, true), c[1], c[2], c[3]});
  if (t.empty()) {
    std::cout << "(no tensors)\n";
  } else {
    t.print(std::cout);
  }

  std::cout << "\nTotals: " << rows.size() << " tensors, " << total << " bytes ("
            << size_string(total) << ")\n";
  Table dt({"DTYPE", "TENSORS", "BYTES"});
  for (const auto& [name, d] : by_dtype) {
    dt.add_row({name, std::to_string(d.first), size_string(d.second)});
  }
  if (!dt.empty()) dt.print(std::cout);
  if (files.size() > 1) {
    std::cout << "\nFiles\n";
    Table ft({"FILE", "TENSORS", "BYTES"});
    for (const auto& [file, f] : files) {
      ft.add_row({shorten(file, kTableColumns - 26, true), std::to_string(f.first),
                  size_string(f.second)});
    }
    ft.print(std::cout);
  }
  if (loaded) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.2f s", loaded->seconds);
    const std::string tail = " as " +
                             (loaded->dtype ? dtype_string(loaded->dtype) : std::string("stored")) +
                             ": " + size_string(loaded->bytes) + " in " + seconds;
    const std::string head = "Loaded onto device ";
    std::cout << '\n'
              << head
              << shorten(loaded->device_text, kTableColumns - width_of(head) - width_of(tail),
                         false)
              << tail << '\n';
  }

  std::cout << "\nMetadata (" << metadata.size() << (metadata.size() == 1 ? " key" : " keys")
            << "; --json prints every value whole)\n";
  if (metadata.empty()) {
    std::cout << "(none)\n";
    return;
  }
  size_t key_w = 3;
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    key_w = std::max(key_w, width_of(one_line(it.key())));
  }
  key_w = std::min<size_t>(key_w, 44);
  const size_t value_w = kTableColumns - key_w - 2;
  Table mt({"KEY", "VALUE"});
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    mt.add_row({shorten(one_line(it.key()), key_w, true),
                shorten(metadata_cell(it.value()), value_w, false)});
  }
  mt.print(std::cout);
}

}  // namespace

int cmd_weights(const GlobalOptions& g, const WeightsOptions& o) {
  RuntimePtr rt = open_runtime(g);
  ProgressLine progress;
  if (isatty(STDERR_FILENO) && (!o.device.empty() || !o.dtype.empty())) {
    const std::string base = o.path.substr(
        o.path.find_last_of('/') == std::string::npos ? 0 : o.path.find_last_of('/') + 1);
    progress.label = shorten(base.empty() ? o.path : base, 32, true);
  }
  gk_weights_options options{};
  options.struct_size = sizeof options;
  if (!progress.label.empty()) {
    options.progress = draw_progress;
    options.progress_user_data = &progress;
  }
  gk_weights* raw = nullptr;
  check(gk_weights_open(rt.get(), o.path.c_str(), &options, &raw), "gk_weights_open");
  WeightsPtr w(raw);

  std::vector<WeightRow> rows;
  const int64_t count = gk_weights_count(w.get());
  for (int64_t i = 0; i < count; ++i) {
    gk_weight_info info{};
    info.struct_size = sizeof info;
    check(gk_weights_info(w.get(), i, &info), "gk_weights_info");
    WeightRow r;
    r.name = str(info.name);
    r.dtype = info.dtype;
    r.shape.assign(info.shape, info.shape + std::clamp(info.ndim, 0, GK_MAX_DIMS));
    r.bytes = info.bytes;
    r.file = str(info.file);
    r.offset = info.file_offset;
    rows.push_back(std::move(r));
  }
  char* meta_text = nullptr;
  check(gk_weights_metadata_json(w.get(), &meta_text), "gk_weights_metadata_json");
  GkString meta_owned(meta_text);
  nlohmann::ordered_json metadata =
      nlohmann::ordered_json::parse(meta_text, nullptr, /*allow_exceptions=*/false);
  if (metadata.is_discarded()) {
    throw std::runtime_error("gk_weights_metadata_json returned text that is not JSON");
  }
  const std::string format = str(gk_weights_format(w.get()));

  std::unique_ptr<LoadReport> loaded;
  if (!o.device.empty() || !o.dtype.empty()) {
    loaded = std::make_unique<LoadReport>(load_all(rt.get(), w.get(), rows, o, progress));
  }

  if (!o.json) {
    print_weights_table(o.path, format, rows, metadata, loaded.get());
    return 0;
  }
  nlohmann::ordered_json j;
  j["path"] = o.path;
  j["format"] = format;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    tensors.push_back({{"name", r.name},
                       {"dtype", dtype_string(r.dtype)},
                       {"shape", r.shape},
                       {"bytes", r.bytes},
                       {"file", r.file},
                       {"offset", r.offset}});
  }
  j["tensors"] = std::move(tensors);
  j["metadata"] = std::move(metadata);
  if (loaded) {
    j["loaded"] = {{"device", loaded->device},
                   {"dtype", loaded->dtype ? dtype_string(loaded->dtype) : std::string("stored")},
                   {"bytes", loaded->bytes},
                   {"seconds", loaded->seconds}};
  }
  std::cout << json_text(j, 2) << '\n';
  return 0;
}


}  // namespace gk::cli
