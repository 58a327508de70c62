#include "collector/abi_convert.h"

#include "format/record.h"

namespace argsdump {

v1::Role ToProtoRole(abi::ArgRole role) {
  switch (role) {
    case abi::ArgRole::kInput: return v1::ROLE_INPUT;
    case abi::ArgRole::kOutput: return v1::ROLE_OUTPUT;
    case abi::ArgRole::kInOut: return v1::ROLE_INOUT;
  }
  return v1::ROLE_UNSPECIFIED;
}

v1::Stage ToProtoStage(abi::Stage stage) {
  return stage == abi::Stage::kBeforeDispatch ? v1::STAGE_BEFORE_DISPATCH
                                              : v1::STAGE_AFTER_COMPLETION;
}

}  // namespace argsdump

// The limits format/record.h gives a record are the ABI arrays' sizes.
static_assert(argsdump::abi::kMaxDims == argsdump::kMaxRecordDims, "");
static_assert(argsdump::abi::kMaxFuncIds == argsdump::kMaxRecordFuncIds, "");
