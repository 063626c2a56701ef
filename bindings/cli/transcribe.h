// `gpukit transcribe`: audio in, text out, through gk_audio_load and gk_asr_transcribe.
#ifndef GPUKIT_BINDINGS_CLI_TRANSCRIBE_H_
#define GPUKIT_BINDINGS_CLI_TRANSCRIBE_H_

#include <gpukit/gpukit.h>

#include <string>

namespace gk::cli {

struct TranscribeOptions {
  std::string file;
  std::string model;   // an HF Whisper folder (tools/convert_whisper_ct2.py writes one)
  std::string device;  // "" = gk_device_default
  std::string dtype = "f32";
  std::string language;  // "" = the model's (detected for multilingual models)
  bool without_timestamps = false;
  bool json = false;
  // Search, fallback, batching and seed: Whisper's defaults, each flag given overrides its
  // field (language, without_timestamps and the callback are set from the fields above).
  gk_transcribe_options decoding = GK_TRANSCRIBE_OPTIONS_INIT;
  bool without_previous_text = false;
};

// Transcribes o.file on `device`: each segment on stdout as "[start --> end] text" when it
// is found (or one JSON object at the end with --json), progress on stderr when stderr is a
// terminal, and a last stderr line with the audio length, the time taken and the RTFx.
int cmd_transcribe(gk_runtime* rt, int32_t device, const TranscribeOptions& o);

}  // namespace gk::cli

#endif  // GPUKIT_BINDINGS_CLI_TRANSCRIBE_H_
