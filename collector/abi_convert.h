// The device's ABI enums (device/abi.h) in the record vocabulary's terms
// (the proto's): the one place the collector's conversions map them.
#ifndef ARGSDUMP_COLLECTOR_ABI_CONVERT_H_
#define ARGSDUMP_COLLECTOR_ABI_CONVERT_H_

#include "device/abi.h"
#include "proto/argsdump/v1/record.pb.h"

namespace argsdump {

v1::Role ToProtoRole(abi::ArgRole role);
v1::Stage ToProtoStage(abi::Stage stage);

}  // namespace argsdump

#endif  // ARGSDUMP_COLLECTOR_ABI_CONVERT_H_
