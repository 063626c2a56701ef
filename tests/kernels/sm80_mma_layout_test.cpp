// The fragment addressing of sm80_gemm_mma (kernels/matmul/sm80_mma_layout.h), run on the
// host. For every dtype class (16-bit, tf32) and smem layout of a and b, each warp's shared
// loads of one k-tile are simulated as the hardware performs them (ldmatrix as the PTX ISA
// describes it; plain 32/64-bit loads), the registers are read through the PTX ISA fragment
// layouts of mma.m16n8k16 / m16n8k8, and the products are scattered through the epilogue's
// row and column maps: the result must be the block tile's product. Every load must also be
// free of bank conflicts. The register assignment after each load mirrors load_a_frags /
// load_b_frags in sm80_gemm_mma.cu.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sm80_mma_layout.h"
#include "sm80_tuning.h"

namespace {

namespace lay = gk::matmul::sm80_layout;
using gk::matmul::Sm80Tf32Tuning;
using gk::matmul::Sm80Tuning;

constexpr int kBM = 128, kBN = 128;

struct Layout {
  int elem_bytes;  // 2: bf16/f16 (m16n8k16), 4: f32 read as tf32 (m16n8k8)
  bool a_kmajor, b_kmajor;
};

std::string name(const Layout& l) {
  return std::string(l.elem_bytes == 2 ? "16-bit" : "tf32") +
         (l.a_kmajor ? " a K-major" : " a M-major") + (l.b_kmajor ? ", b K-major" : ", b N-major");
}

int block_k(int eb) {
  return eb == 4 ? Sm80Tf32Tuning::kBlockK : Sm80Tuning::kBlockK;
}
int mma_k(int eb) {
  return eb == 4 ? 8 : 16;
}

// One operand's smem tile: values by element offset; padding holds NaN, so a fragment
// that reads it poisons the product.
struct Tile {
  int ld;
  bool k_major;
  std::vector<double> v;
  Tile(bool km, int eb, int mn) : ld(lay::tile_ld(km, eb, block_k(eb), mn)), k_major(km) {
    v.assign(size_t(km ? mn : block_k(eb)) * size_t(ld), NAN);
  }
  double& at(int mn, int k) { return v[size_t(k_major ? mn * ld + k : k * ld + mn)]; }
};

// What one 32-bit register holds: its two 16-bit halves, each as (element offset, which
// half of a 32-bit element); for 16-bit data `part` is 0 and the halves are two elements.
struct Half {
  int elem, part;
};
using Reg = std::array<Half, 2>;

Reg reg_at_byte(int64_t byte, int eb) {
  Reg r;
  for (int h = 0; h < 2; ++h) {
    const int64_t b = byte + 2 * h;
    r[h] = {int(b / eb), int(b % eb) / 2};
  }
  return r;
}

// Bank conflicts of one shared-memory request phase: the most distinct 4-byte words that
// fall into one bank (1 = conflict-free).
int ways(const std::vector<int64_t>& byte_addrs, int bytes_each) {
  std::map<int, std::set<int64_t>> words_by_bank;
  for (int64_t a : byte_addrs)
    for (int w = 0; w < bytes_each / 4; ++w) words_by_bank[int((a / 4 + w) % 32)].insert(a / 4 + w);
  int worst = 0;
  for (auto& [bank, words] : words_by_bank) worst = std::max(worst, int(words.size()));
  return worst;
}

// ldmatrix.x4: row_elem[l] = element offset of the row lane l points to. Lane l receives in
// register i bytes 4(l%4)..+3 of row l/4 of matrix i; with .trans, the 16-bit elements at
// column l/4 of rows 2(l%4) and 2(l%4)+1.
std::array<std::array<Reg, 4>, 32> ldmatrix_x4(const std::array<int, 32>& row_elem, int eb,
                                               bool trans, int* worst_ways) {
  std::array<std::array<Reg, 4>, 32> out{};
  for (int i = 0; i < 4; ++i) {
    std::vector<int64_t> rows;
    for (int r = 0; r < 8; ++r) {
      const int64_t byte = int64_t(row_elem[8 * i + r]) * eb;
      EXPECT_EQ(byte % 16, 0) << "ldmatrix row address not 16-byte aligned";
      rows.push_back(byte);
    }
    *worst_ways = std::max(*worst_ways, ways(rows, 16));
    for (int l = 0; l < 32; ++l) {
      if (!trans) {
        out[l][i] = reg_at_byte(rows[l / 4] + 4 * (l % 4), eb);
      } else {
        EXPECT_EQ(eb, 2) << ".trans transposes 16-bit elements only";
        for (int e = 0; e < 2; ++e)
          out[l][i][e] = reg_at_byte(rows[2 * (l % 4) + e] + 2 * (l / 4), eb)[0];
      }
    }
  }
  return out;
}

// A plain shared load of `bytes` (4 or 8) per lane: returns each lane's registers and
// records the conflict ways (8-byte loads are served per half warp).
std::array<std::vector<Reg>, 32> plain_load(const std::array<int, 32>& elem, int eb, int bytes,
                                            int* worst_ways) {
  std::array<std::vector<Reg>, 32> out;
  const int per_phase = bytes == 8 ? 16 : 32;
  for (int p = 0; p < 32; p += per_phase) {
    std::vector<int64_t> addrs;
    for (int l = p; l < p + per_phase; ++l) addrs.push_back(int64_t(elem[l]) * eb);
    *worst_ways = std::max(*worst_ways, ways(addrs, bytes));
  }
  for (int l = 0; l < 32; ++l) {
    EXPECT_EQ(int64_t(elem[l]) * eb % bytes, 0) << "misaligned " << bytes << "-byte load";
    for (int r = 0; r < bytes / 4; ++r)
      out[l].push_back(reg_at_byte(int64_t(elem[l]) * eb + 4 * r, eb));
  }
  return out;
}

double value(Tile& t, const Half& h) {
  EXPECT_EQ(h.part, 0) << "a 32-bit element read from its upper half";
  return t.v[size_t(h.elem)];
}

// PTX fragment positions (g = lane/4, t = lane%4). A: (row, k) of register r, half e.
std::pair<int, int> a_pos(int eb, int lane, int r, int e) {
  const int g = lane / 4, t = lane % 4;
  if (eb == 2) return {g + 8 * (r % 2), 2 * t + e + 8 * (r / 2)};
  return {g + 8 * (r % 2), t + 4 * (r / 2)};
}
// B: (k, n) of register r, half e.
std::pair<int, int> b_pos(int eb, int lane, int r, int e) {
  const int g = lane / 4, t = lane % 4;
  if (eb == 2) return {2 * t + e + 8 * r, g};
  return {t + 4 * r, g};
}

struct Result {
  std::vector<double> out;  // kBM × kBN, NaN where never written
  std::vector<int> writes;
  int worst_ways = 0;
};

// One block tile's k-tile, all 8 warps, as sm80_gemm_kernel computes it.
Result run_block(const Layout& L, Tile& ta, Tile& tb) {
  const int eb = L.elem_bytes, mk = mma_k(eb), vec = lay::vec_elems(eb);
  const bool paired = eb == 4 && !L.a_kmajor;
  const int regs_per_elem = eb == 2 ? 2 : 1;  // elements per 32-bit register
  Result res;
  res.out.assign(kBM * kBN, NAN);
  res.writes.assign(kBM * kBN, 0);
  for (int warp = 0; warp < 8; ++warp) {
    const int wm = warp / 4, wn = warp % 4;
    double acc[4][4][16][8] = {};  // [mi][ni][fragment row][fragment col]
    for (int kk = 0; kk < block_k(eb) / mk; ++kk) {
      std::array<std::array<std::array<Reg, 4>, 4>, 32> af{};  // [lane][mi][r]
      std::array<std::array<std::array<Reg, 2>, 4>, 32> bf{};  // [lane][ni][r]
      if (L.a_kmajor || eb == 2) {
        for (int mi = 0; mi < 4; ++mi) {
          std::array<int, 32> rows;
          for (int l = 0; l < 32; ++l)
            rows[l] = lay::a_ldsm_offset(L.a_kmajor, ta.ld, vec, mk, l, wm, mi, kk);
          const auto r = ldmatrix_x4(rows, eb, !L.a_kmajor, &res.worst_ways);
          for (int l = 0; l < 32; ++l)
            for (int i = 0; i < 4; ++i) af[l][mi][i] = r[l][i];
        }
      } else {
        for (int mi = 0; mi < 4; ++mi)
          for (int kh = 0; kh < 2; ++kh) {
            std::array<int, 32> at;
            for (int l = 0; l < 32; ++l) at[l] = lay::tf32_a_mn_offset(ta.ld, l, wm, mi, kk, kh);
            const auto r = plain_load(at, eb, 8, &res.worst_ways);
            for (int l = 0; l < 32; ++l) {
              af[l][mi][2 * kh] = r[l][0];
              af[l][mi][2 * kh + 1] = r[l][1];
            }
          }
      }
      if (L.b_kmajor || eb == 2) {
        for (int nj = 0; nj < 2; ++nj) {
          std::array<int, 32> rows;
          for (int l = 0; l < 32; ++l)
            rows[l] = lay::b_ldsm_offset(L.b_kmajor, tb.ld, vec, mk, l, wn, nj, kk);
          const auto r = ldmatrix_x4(rows, eb, !L.b_kmajor, &res.worst_ways);
          for (int l = 0; l < 32; ++l) {
            bf[l][2 * nj][0] = r[l][0];
            bf[l][2 * nj][1] = r[l][1];
            bf[l][2 * nj + 1][0] = r[l][2];
            bf[l][2 * nj + 1][1] = r[l][3];
          }
        }
      } else {
        for (int ni = 0; ni < 4; ++ni)
          for (int kh = 0; kh < 2; ++kh) {
            std::array<int, 32> at;
            for (int l = 0; l < 32; ++l) at[l] = lay::tf32_b_mn_offset(tb.ld, l, wn, ni, kk, kh);
            const auto r = plain_load(at, eb, 4, &res.worst_ways);
            for (int l = 0; l < 32; ++l) bf[l][ni][kh] = r[l][0];
          }
      }
      // The mma, per the PTX fragment layouts.
      for (int mi = 0; mi < 4; ++mi)
        for (int ni = 0; ni < 4; ++ni) {
          std::vector<double> A(16 * mk, NAN), B(mk * 8, NAN);
          for (int l = 0; l < 32; ++l) {
            for (int r = 0; r < 4; ++r)
              for (int e = 0; e < regs_per_elem; ++e) {
                const auto [row, k] = a_pos(eb, l, r, e);
                A[row * mk + k] = value(ta, eb == 2 ? af[l][mi][r][e] : af[l][mi][r][0]);
                if (eb == 4) EXPECT_EQ(af[l][mi][r][1].elem, af[l][mi][r][0].elem);
              }
            for (int r = 0; r < 2; ++r)
              for (int e = 0; e < regs_per_elem; ++e) {
                const auto [k, n] = b_pos(eb, l, r, e);
                B[k * 8 + n] = value(tb, eb == 2 ? bf[l][ni][r][e] : bf[l][ni][r][0]);
                if (eb == 4) EXPECT_EQ(bf[l][ni][r][1].elem, bf[l][ni][r][0].elem);
              }
          }
          for (int row = 0; row < 16; ++row)
            for (int n = 0; n < 8; ++n)
              for (int k = 0; k < mk; ++k) acc[mi][ni][row][n] += A[row * mk + k] * B[k * 8 + n];
        }
    }
    // Epilogue: c(2h + j) of lane (g, t) is fragment row g + 8h, column 2t + j.
    for (int l = 0; l < 32; ++l) {
      const int g = l / 4, t = l % 4;
      for (int mi = 0; mi < 4; ++mi)
        for (int h = 0; h < 2; ++h)
          for (int ni = 0; ni < 4; ++ni)
            for (int j = 0; j < 2; ++j) {
              const int row = wm * lay::kWarpM + lay::warp_row(paired, mi, h, g);
              const int col = wn * lay::kWarpN + ni * 8 + 2 * t + j;
              res.out[row * kBN + col] = acc[mi][ni][g + 8 * h][2 * t + j];
              ++res.writes[row * kBN + col];
            }
    }
  }
  return res;
}

const Layout kLayouts[] = {{2, true, true}, {2, true, false}, {2, false, true}, {2, false, false},
                           {4, true, true}, {4, true, false}, {4, false, true}, {4, false, false}};

TEST(Sm80MmaLayout, fragments_of_every_layout_compute_the_block_tile_product) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-4, 4);  // products and sums stay exact
  for (const Layout& L : kLayouts) {
    SCOPED_TRACE(name(L));
    const int eb = L.elem_bytes, bk = block_k(eb);
    Tile ta(L.a_kmajor, eb, kBM), tb(L.b_kmajor, eb, kBN);
    for (int m = 0; m < kBM; ++m)
      for (int k = 0; k < bk; ++k) ta.at(m, k) = small(rng);
    for (int n = 0; n < kBN; ++n)
      for (int k = 0; k < bk; ++k) tb.at(n, k) = small(rng);
    const Result res = run_block(L, ta, tb);
    int wrong = 0;
    for (int m = 0; m < kBM; ++m)
      for (int n = 0; n < kBN; ++n) {
        double ref = 0;
        for (int k = 0; k < bk; ++k) ref += ta.at(m, k) * tb.at(n, k);
        const int i = m * kBN + n;
        if (res.writes[i] != 1 || res.out[i] != ref) {
          if (++wrong <= 5)
            ADD_FAILURE() << "out[" << m << "][" << n << "] = " << res.out[i] << ", want " << ref
                          << " (written " << res.writes[i] << " times)";
        }
      }
    EXPECT_EQ(wrong, 0);
  }
}

TEST(Sm80MmaLayout, fragment_loads_are_free_of_bank_conflicts) {
  for (const Layout& L : kLayouts) {
    SCOPED_TRACE(name(L));
    const int eb = L.elem_bytes;
    Tile ta(L.a_kmajor, eb, kBM), tb(L.b_kmajor, eb, kBN);
    // Stages and the B tiles start on 128-byte boundaries, so offsets in a tile decide banks.
    EXPECT_EQ(ta.v.size() * eb % 128, 0u);
    EXPECT_EQ(tb.v.size() * eb % 128, 0u);
    EXPECT_EQ(ta.ld * eb % 16, 0) << "cp.async rows must stay 16-byte aligned";
    EXPECT_EQ(tb.ld * eb % 16, 0);
    std::fill(ta.v.begin(), ta.v.end(), 0.0);
    std::fill(tb.v.begin(), tb.v.end(), 0.0);
    EXPECT_EQ(run_block(L, ta, tb).worst_ways, 1);
  }
}

}  // namespace
