// How an argsdump.v1.ArgRecord is named and printed: the mapping between the
// device's enums and the proto's, the manifest spellings (UPPERCASE dtypes,
// "input"/"before_dispatch", "0x" + 16 hex task ids), scalar values printed
// with round-trip precision, and the manifest's total order of entries.
#ifndef ARGSDUMP_SERVER_RECORD_FORMAT_H_
#define ARGSDUMP_SERVER_RECORD_FORMAT_H_

#include <cstdint>
#include <optional>
#include <deque>
#include <string>
#include <vector>

#include "device/abi.h"
#include "device/dtype.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

v1::DType ToProtoDType(DataType dtype);
// nullopt for DTYPE_UNSPECIFIED or a value this build does not know.
std::optional<DataType> FromProtoDType(int dtype);
v1::Role ToProtoRole(abi::ArgRole role);
v1::Stage ToProtoStage(abi::Stage stage);

std::string TaskIdHex(uint64_t task_id);  // "0x0000000200000a00"
const char* RoleName(v1::Role role);      // "input" / "output" / "inout"
const char* StageName(v1::Stage stage);   // "before_dispatch" / "after_completion"
const char* KindName(v1::Kind kind);      // "tensor" / "scalar"
std::string DTypeName(int dtype);         // "FLOAT32", or "UNKNOWN(n)"

// A scalar's value as a JSON token: the shortest decimal that reads back to
// the same value for floats, integers for integer types, true/false, and the
// strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers).
std::string FormatScalarJson(int dtype, uint64_t bits);

// The manifest's order: (task_id, stage, arg_index, role), then kind,
// bin_offset and device_thread so that the order is total.
bool RecordLess(const v1::ArgRecord& a, const v1::ArgRecord& b);

// A capture's records in arrival order. A deque: growing it never moves the
// records already held (a vector's doubling moved every proto once more).
using RecordList = std::deque<v1::ArgRecord>;

// Indices of `records` in RecordLess order (sorts compact keys, not protos).
std::vector<uint32_t> ManifestOrder(const RecordList& records);

}  // namespace argsdump

#endif  // ARGSDUMP_SERVER_RECORD_FORMAT_H_
