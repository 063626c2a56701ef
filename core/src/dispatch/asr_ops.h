// The rules of the asr ops (docs/ops.md, "ASR ops"): log_mel_spectrogram.
#pragma once

#include <vector>

#include "dispatch/op_schema.h"

namespace gk {

// Appends the asr ops' schemas (called once, by the OpRegistry constructor).
void add_asr_op_schemas(std::vector<OpSchema>& schemas);

}  // namespace gk
