// Zip archives written byte by byte for tests and fuzz seeds: the cases
// the `zip` tool does not make (zip64 records, damaged and hostile
// archives: any member name, a symbolic-link member, a size that lies,
// members sharing their data). Test-only.
#ifndef ARGSDUMP_VIEWER_TEST_ZIP_H_
#define ARGSDUMP_VIEWER_TEST_ZIP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace argsdump {

struct TestZipMember {
  std::string name, data;
  bool deflate = false;
  bool zip64 = false;  // sizes and offset in a zip64 extra field
  // Unix mode in the external attributes' high 16 bits ("made by" Unix),
  // e.g. 0120777 for a symbolic link (its data is the target).
  std::optional<uint32_t> unix_mode;
  // The size the central directory declares instead of data.size().
  std::optional<uint64_t> declared_size;
  // Point the central entry at member `data_of`'s local header and data
  // instead of its own (the overlapping-member zip bomb).
  std::optional<size_t> data_of;
};

// The archive; `zip64_end` adds the zip64 end record and locator.
std::string MakeTestZip(const std::vector<TestZipMember>& members, bool zip64_end = false);

// Raw deflate (no zlib header), as zip stores it.
std::string RawDeflate(const std::string& data);

}  // namespace argsdump

#endif  // ARGSDUMP_VIEWER_TEST_ZIP_H_
