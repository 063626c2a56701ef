// `gpukit generate`: text in, text out, through gk_model_* and gk_tokenizer_*.
#ifndef GPUKIT_BINDINGS_CLI_GENERATE_H_
#define GPUKIT_BINDINGS_CLI_GENERATE_H_

#include <gpukit/gpukit.h>

#include <cstdint>
#include <string>

namespace gk::cli {

struct GenerateOptions {
  std::string model;  // a .gguf file, or a folder with config.json, SafeTensors, tokenizer.json
  std::string prompt;
  std::string device;  // "" = gk_device_default
  std::string dtype = "f32";
  int32_t max_tokens = 64;
  double temperature = 0;  // greedy
  int32_t top_k = 0;
  double top_p = 1;
  double min_p = 0;
  double repetition_penalty = 1;
  uint64_t seed = 0;
  bool chat = false;  // wrap the prompt as one user turn of a ChatML conversation
};

// Generates from o.prompt on `device`, printing the text on stdout as the tokens come and,
// on stderr, a last line with the load time and the prefill and decode speeds.
int cmd_generate(gk_runtime* rt, int32_t device, const GenerateOptions& o);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_GENERATE_H_
