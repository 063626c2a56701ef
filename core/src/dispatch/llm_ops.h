// The rules of the llm ops (docs/ops.md, "LLM ops"): embedding, rope, attention, sample.
#pragma once

#include <vector>

#include "dispatch/op_schema.h"

namespace gk {

// Appends the llm ops' schemas (called once, by the OpRegistry constructor).
void add_llm_op_schemas(std::vector<OpSchema>& schemas);

}  // namespace gk
