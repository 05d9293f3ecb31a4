// The debug-mode varlen offset check (src/api/varlen_check.h): the contract on the host copy of
// the offsets, each way of breaking it named. The device copy around it needs a GPU (not here).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "api/varlen_check.h"

namespace flashattn::testing {
namespace {

Status check(const std::vector<int32_t>& cu, int max_len, int64_t total) {
  return detail::check_varlen_offsets(cu.data(), static_cast<int>(cu.size()) - 1, max_len, total, "cu_seqlens_k",
                                      "max_seqlen_k");
}

void expect_named(const Status& s, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_EQ(s.message().rfind("cu_seqlens_k: ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

TEST(VarlenCheck, ContractHolds) {
  EXPECT_TRUE(check({0, 5, 5, 12}, 7, 12).ok());   // a zero-length sequence, the longest at max
  EXPECT_TRUE(check({3, 4, 10}, 6, 20).ok());      // rows before the first and after the last
  EXPECT_TRUE(check({0}, 0, 0).ok());              // no sequence
}

TEST(VarlenCheck, EachBreakIsNamed) {
  expect_named(check({-1, 4}, 8, 8), "first offset is negative");
  expect_named(check({0, 6, 4, 9}, 8, 9), "decrease at index 2");
  expect_named(check({0, 6, 15}, 8, 15), "sequence 1 is 9 rows long, more than max_seqlen_k = 8");
  expect_named(check({0, 6, 13}, 8, 12), "past the packed tensor's 12 rows");
}

}  // namespace
}  // namespace flashattn::testing
