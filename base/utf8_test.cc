#include "base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace argsdump {
namespace {

TEST(Utf8Test, SequencesAreMeasuredAndBadOnesRefused) {
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xA9x"), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC"), 3u);       // €
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80"), 4u);   // U+1F600
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF"), 4u);   // U+10FFFF
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  for (const char* bad : {"\x80", "\xBF", "\xC0\x80", "\xC1\xBF",  // continuation, overlong
                          "\xC3", "\xE2\x82", "\xF0\x9F\x98",      // cut short
                          "\xE0\x9F\xBF",                          // overlong 3-byte
                          "\xED\xA0\x80", "\xED\xBF\xBF",          // surrogates
                          "\xF0\x8F\xBF\xBF",                      // overlong 4-byte
                          "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",  // past U+10FFFF
                          "\xFF", "\xC3\x28"}) {
    EXPECT_EQ(Utf8SequenceLength(bad), 0u) << testing::PrintToString(std::string(bad));
  }
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("case:ci \xC3\xA9\xE2\x82\xAC"));
  EXPECT_FALSE(IsValidUtf8("ok\xFF"));
  EXPECT_FALSE(IsValidUtf8(std::string("a\xC3", 2)));
}

}  // namespace
}  // namespace argsdump
