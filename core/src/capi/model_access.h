// What other C entry points (gk_asr_transcribe) read of a gk_model beyond gk_model_get_info.
#pragma once

#include <string>

#include "gpukit/gpukit.h"

namespace gk {

// The runtime handle the model's calls run on; valid while the model lives.
gk_runtime* model_runtime(gk_model* model);
// The path gk_model_load was given (an HF folder or a .gguf file).
const std::string& model_path(const gk_model* model);

}  // namespace gk
