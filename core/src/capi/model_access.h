// What other C entry points (gk_asr_transcribe) read of a gk_model beyond gk_model_get_info.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gpukit/gpukit.h"

namespace gk {

// The runtime handle the model's calls run on; valid while the model lives.
gk_runtime* model_runtime(gk_model* model);
// The path gk_model_load was given (an HF folder or a .gguf file).
const std::string& model_path(const gk_model* model);
// The value kept with the model under `key`: made by `make` at the first call, the same one
// for later calls (from any thread) while the model lives. For what is costly to derive per
// call, such as the tokenizer a transcription reads from the model's folder.
std::shared_ptr<const void> model_memo(gk_model* model, const std::string& key,
                                       const std::function<std::shared_ptr<const void>()>& make);

}  // namespace gk
