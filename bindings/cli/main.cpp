// gpukit — command-line view of a GPUkit runtime: versions, devices, plugins, dispatch and the
// scheduler (on a demo of its own: tasks belong to the process that made them).
//
//   gpukit info [--json]
//   gpukit plugins [--json]
//   gpukit explain OP --shape 64x64 [--shape i32:8 ...] [--device N] [--dtype T]
//                  [--attr k=v ...] [--json]
//   gpukit tasks [--device N] [--json]
//   gpukit weights PATH [--device D] [--dtype T] [--json]
//   gpukit generate --model PATH --prompt TEXT [--max-tokens N] [--device D] [--chat] ...
//   gpukit transcribe FILE --model PATH [--device D] [--language L] [--beam-size N]
//                     [--best-of N] [--temperature T] [--temperature-increment S]
//                     [--compression-ratio-threshold R] [--logprob-threshold L]
//                     [--no-speech-threshold P] [--no-previous-text] [--batch-size N]
//                     [--seed S] [--without-timestamps] [--json]
//
// A client of the C ABI (gpukit.h) only. On failure it prints the status and
// gk_last_error() to stderr and exits non-zero.
#include <gpukit/gpukit.h>

#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>
#include <string>

#include "cli_common.h"
#include "generate.h"
#include "info.h"
#include "tasks.h"
#include "transcribe.h"
#include "weights.h"


namespace gk::cli {
namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "gpukit — inspect a GPUkit runtime: devices, plugins, op dispatch, scheduler tasks and "
      "weight files"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpukit ") + gk_library_version());
  GlobalOptions g;
  app.add_option("--devices", g.devices, "Devices to open: cpu, cuda or all (default: all)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}));
  app.add_option("--plugin-path", g.plugin_path, "Extra colon-separated manifest folders");
  app.add_option("--disable", g.plugins_disable, "Glob of plugin names to skip");
  app.add_option("--log-level", g.log_level, "debug, info, warning (default), error or off")
      ->check(CLI::IsMember({"debug", "info", "warning", "error", "off"}));

  bool info_json = false;
  CLI::App* info = app.add_subcommand("info", "Library and ABI versions, devices, plugins");
  info->add_flag("--json", info_json, "Print gk_runtime_info_json");

  bool plugins_json_flag = false;
  CLI::App* plugins =
      app.add_subcommand("plugins", "Every plugin manifest found: loaded, or skipped and why");
  plugins->add_flag("--json", plugins_json_flag, "JSON output");

  ExplainOptions e;
  CLI::App* explain =
      app.add_subcommand("explain", "Which plugin would serve an op, and why the others not");
  explain->add_option("op", e.op, "Op name (docs/ops.md)")->required();
  explain->add_option("--device,-d", e.device, "Device id (default: gk_device_default)");
  explain->add_option("--dtype,-t", e.dtype, "Input dtype (default f32)");
  explain->add_option("--out-dtype", e.out_dtype, "Output dtype of cast (its dtype attribute)");
  explain->add_option("--shape,-s", e.shapes,
                      "Input i's shape, e.g. 64x64, or dtype:shape (i32:8) for an input of "
                      "another dtype; one per input, in order");
  explain->add_option("--attr,-a", e.attrs,
                      "Attribute name=value: int, float, ints (1,2 or [1]), else text");
  explain->add_flag("--json", e.json, "Print gk_explain's JSON");

  bool tasks_json = false;
  int32_t tasks_device = -1;
  CLI::App* tasks = app.add_subcommand(
      "tasks",
      "Scheduler view (QoS, state, reason, memory, SM partition, stream priority) of a "
      "built-in demo: a Guaranteed, a Burstable, a BestEffort and a pending task under a "
      "256 MiB budget. Tasks belong to the process that made them, so this shows the "
      "demo's own tasks, not other processes'");
  tasks->add_option("--device,-d", tasks_device, "Device id (default: gk_device_default)");
  tasks->add_flag("--json", tasks_json, "Print gk_scheduler_json");

  WeightsOptions w;
  CLI::App* weights = app.add_subcommand(
      "weights",
      "The tensors (name, dtype, shape, bytes), totals and metadata of a weight set: a "
      ".safetensors file, a sharded checkpoint's index.json, a folder holding either, or a "
      ".gguf file. Nothing is read but the headers unless --device or --dtype asks to load "
      "every tensor");
  weights->add_option("path", w.path, "The weight file, index or folder")->required();
  weights->add_option("--device,-d", w.device,
                      "Load every tensor onto this device (an id, cpu, cuda or cuda:N) and "
                      "report the time");
  weights->add_option("--dtype,-t", w.dtype,
                      "Load every tensor as f32, f16, bf16 or f64 (block-quantized ones "
                      "dequantized; integer ones stay as stored)");
  weights->add_flag("--json", w.json,
                    "JSON: {path, format, tensors: [{name, dtype, shape, bytes, file, offset}], "
                    "metadata} (the metadata whole)");

  GenerateOptions gen;
  CLI::App* generate = app.add_subcommand(
      "generate",
      "Generates text with a decoder-only model (Llama, Mistral, Qwen2, Qwen3, SmolLM2, "
      "GPT-2): the text on stdout as it comes, then load time and prefill/decode speed on "
      "stderr");
  generate->add_option("--model,-m", gen.model,
                       "A .gguf file, or a folder with config.json, SafeTensors weights and "
                       "tokenizer.json")
      ->required();
  generate->add_option("--prompt,-p", gen.prompt, "The prompt text")->required();
  generate->add_option("--max-tokens,-n", gen.max_tokens, "The most tokens to generate (64)");
  generate->add_option("--device,-d", gen.device, "An id, cpu, cuda or cuda:N (default: best)");
  generate->add_option("--dtype,-t", gen.dtype, "f32, bf16 or f16 (f32)");
  generate->add_option("--temperature", gen.temperature, "0 (the default) is greedy");
  generate->add_option("--top-k", gen.top_k, "Keep the k most likely tokens (0: off)");
  generate->add_option("--top-p", gen.top_p, "Keep the smallest set of this probability (1)");
  generate->add_option("--min-p", gen.min_p, "Drop tokens below min_p x the top one's (0)");
  generate->add_option("--repetition-penalty", gen.repetition_penalty, "HF's (1: off)");
  generate->add_option("--seed", gen.seed, "The same seed gives the same text (0)");
  generate->add_flag("--chat", gen.chat,
                     "Send the prompt as a user turn of a ChatML conversation (SmolLM2, Qwen2 "
                     "instruct models)");

  TranscribeOptions tr;
  CLI::App* transcribe = app.add_subcommand(
      "transcribe",
      "Transcribes a sound file with a Whisper model: segments with their times on stdout as "
      "they come, then the audio length, time taken and RTFx on stderr");
  transcribe->add_option("file", tr.file, "A sound file (WAV, FLAC, Ogg, ...)")->required();
  transcribe->add_option("--model,-m", tr.model,
                         "An HF Whisper folder (config.json, model.safetensors, tokenizer.json, "
                         "generation_config.json)")
      ->required();
  transcribe->add_option("--device,-d", tr.device, "An id, cpu, cuda or cuda:N (default: best)");
  transcribe->add_option("--dtype,-t", tr.dtype, "f32, bf16 or f16 (f32)");
  transcribe->add_option("--language,-l", tr.language,
                         "A language code such as en (default: detected, or en for .en models)");
  transcribe->add_flag("--without-timestamps", tr.without_timestamps,
                       "One segment per 30 s window, no timestamp tokens");
  gk_transcribe_options& dec = tr.decoding;
  transcribe->add_option("--beam-size", dec.beam_size,
                         "At temperature 0: 1 is greedy, N > 1 beam search (1)");
  transcribe->add_option("--best-of", dec.best_of,
                         "Candidates sampled per window at a temperature > 0, the likeliest "
                         "kept (5)");
  transcribe->add_option("--temperature", dec.temperature,
                         "The first temperature: 0 greedy or beam search, > 0 sampling (0)");
  transcribe->add_option("--temperature-increment", dec.temperature_increment,
                         "Fallback step: a window whose text fails a threshold is decoded again "
                         "at the next temperature, up to 1.0; 0 disables fallback (0.2)");
  transcribe->add_option("--compression-ratio-threshold", dec.compression_ratio_threshold,
                         "Fall back when the text's zlib compression ratio is above it (too "
                         "repetitive); 0: unchecked (2.4)");
  transcribe->add_option("--logprob-threshold", dec.logprob_threshold,
                         "Fall back when the average log-probability is below it; also skip a "
                         "silent window only below it (-1)");
  transcribe->add_option("--no-speech-threshold", dec.no_speech_threshold,
                         "Skip a window whose no-speech probability is above it and whose "
                         "average log-probability is below --logprob-threshold (0.6)");
  transcribe->add_flag("--no-previous-text", tr.without_previous_text,
                       "Do not prompt each window with the text before it (Whisper's "
                       "condition_on_previous_text=False)");
  transcribe->add_option("--batch-size", dec.batch_size,
                         "Split the audio at its quietest moments into up to N parts of about 30 s "
                         "or more, transcribed side by side; 1 reads them one after another (1)");
  transcribe->add_option("--seed", dec.seed, "Sampling: the same seed gives the same text (0)");
  transcribe->add_flag("--json", tr.json,
                       "JSON: {text, language, duration, segments: [{start, end, text, "
                       "avg_logprob, no_speech_prob, tokens}]}");

  bool cache_clear = false, cache_json = false;
  CLI::App* cache = app.add_subcommand(
      "cache",
      "The disk cache of JIT-compiled kernels (NVRTC): folder, entries, size and limit");
  cache->add_flag("--clear", cache_clear, "Remove every entry first");
  cache->add_flag("--json", cache_json, "JSON: {dir, entries, bytes, limit_bytes[, removed]}");

  CLI11_PARSE(app, argc, argv);

  if (info->parsed()) return cmd_info(g, info_json);
  if (plugins->parsed()) return cmd_plugins(g, plugins_json_flag);
  if (explain->parsed()) return cmd_explain(g, e);
  if (tasks->parsed()) return cmd_tasks(g, tasks_device, tasks_json);
  if (weights->parsed()) return cmd_weights(g, w);
  if (cache->parsed()) return cmd_cache(cache_clear, cache_json);
  if (generate->parsed()) {
    RuntimePtr rt = open_runtime(g);
    const int32_t device =
        gen.device.empty() ? gk_device_default(rt.get()) : parse_device(rt.get(), gen.device);
    return cmd_generate(rt.get(), device, gen);
  }
  if (transcribe->parsed()) {
    RuntimePtr rt = open_runtime(g);
    const int32_t device =
        tr.device.empty() ? gk_device_default(rt.get()) : parse_device(rt.get(), tr.device);
    return cmd_transcribe(rt.get(), device, tr);
  }
  return 2;
}

}  // namespace
}  // namespace gk::cli

int main(int argc, char** argv) {
  try {
    return gk::cli::run(argc, argv);
  } catch (const gk::cli::GkError& e) {
    std::cerr << "gpukit: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "gpukit: " << e.what() << '\n';
    return 2;
  }
}
