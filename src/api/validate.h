// Argument validation and conversion of the public ForwardArgs into FwdParams.
#pragma once

#include "common/params.h"
#include "flashattn/flashattn.h"

namespace flashattn::detail {

// Validates `a`; on success fills `*p` (when non-null) and sets `*empty` when any size is 0.
Status validate_and_convert(const ForwardArgs& a, FwdParams* p, bool* empty);

}  // namespace flashattn::detail
