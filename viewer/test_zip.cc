#include "viewer/test_zip.h"

#include <zlib.h>

namespace argsdump {
namespace {

void Le(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string RawDeflate(const std::string& data) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(&out[0]);
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

std::string MakeTestZip(const std::vector<TestZipMember>& members, bool zip64_end) {
  std::string out, cd;
  std::vector<uint64_t> offsets;
  std::vector<std::string> bodies;
  std::vector<uint32_t> crcs;
  for (const TestZipMember& f : members) {
    const std::string body = f.deflate ? RawDeflate(f.data) : f.data;
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(f.data.data()), static_cast<uInt>(f.data.size())));
    offsets.push_back(out.size());
    bodies.push_back(body);
    crcs.push_back(crc);
    Le(&out, 0x04034b50, 4);
    Le(&out, 20, 2);
    Le(&out, 0, 2);
    Le(&out, f.deflate ? 8 : 0, 2);
    Le(&out, 0, 4);  // time, date
    Le(&out, crc, 4);
    Le(&out, f.zip64 ? 0xFFFFFFFF : body.size(), 4);
    Le(&out, f.zip64 ? 0xFFFFFFFF : f.data.size(), 4);
    Le(&out, f.name.size(), 2);
    Le(&out, 0, 2);
    out += f.name;
    out += body;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const TestZipMember& f = members[i];
    const size_t d = f.data_of.value_or(i);
    const uint64_t offset = offsets[d];
    const std::string& body = bodies[d];
    const uint64_t size = f.declared_size.value_or(members[d].data.size());
    std::string extra;
    if (f.zip64) {
      Le(&extra, 0x0001, 2);
      Le(&extra, 24, 2);
      Le(&extra, size, 8);
      Le(&extra, body.size(), 8);
      Le(&extra, offset, 8);
    }
    const bool big = f.zip64 || size >= 0xFFFFFFFF;
    Le(&cd, 0x02014b50, 4);
    Le(&cd, f.unix_mode ? (3 << 8) | 20 : 20, 2);  // made by: Unix or MS-DOS
    Le(&cd, 20, 2);
    Le(&cd, 0, 2);
    Le(&cd, members[d].deflate ? 8 : 0, 2);
    Le(&cd, 0x6000, 2);                     // 12:00:00
    Le(&cd, (46 << 9) | (12 << 5) | 1, 2);  // 2026-12-01
    Le(&cd, crcs[d], 4);
    Le(&cd, f.zip64 ? 0xFFFFFFFF : body.size(), 4);
    Le(&cd, big ? 0xFFFFFFFF : size, 4);
    Le(&cd, f.name.size(), 2);
    if (!f.zip64 && big) {
      Le(&extra, 0x0001, 2);
      Le(&extra, 8, 2);
      Le(&extra, size, 8);
    }
    Le(&cd, extra.size(), 2);
    Le(&cd, 0, 2);
    Le(&cd, 0, 2);
    Le(&cd, 0, 2);
    Le(&cd, f.unix_mode ? static_cast<uint64_t>(*f.unix_mode) << 16 : 0, 4);
    Le(&cd, f.zip64 ? 0xFFFFFFFF : offset, 4);
    cd += f.name;
    cd += extra;
  }
  const uint64_t cd_at = out.size();
  out += cd;
  if (zip64_end) {
    const uint64_t z64_at = out.size();
    Le(&out, 0x06064b50, 4);
    Le(&out, 44, 8);
    Le(&out, 45, 2);
    Le(&out, 45, 2);
    Le(&out, 0, 4);
    Le(&out, 0, 4);
    Le(&out, members.size(), 8);
    Le(&out, members.size(), 8);
    Le(&out, cd.size(), 8);
    Le(&out, cd_at, 8);
    Le(&out, 0x07064b50, 4);
    Le(&out, 0, 4);
    Le(&out, z64_at, 8);
    Le(&out, 1, 4);
  }
  Le(&out, 0x06054b50, 4);
  Le(&out, 0, 2);
  Le(&out, 0, 2);
  Le(&out, zip64_end ? 0xFFFF : members.size(), 2);
  Le(&out, zip64_end ? 0xFFFF : members.size(), 2);
  Le(&out, zip64_end ? 0xFFFFFFFF : cd.size(), 4);
  Le(&out, zip64_end ? 0xFFFFFFFF : cd_at, 4);
  Le(&out, 0, 2);
  return out;
}

}  // namespace argsdump
