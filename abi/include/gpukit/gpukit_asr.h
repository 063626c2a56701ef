/*
 * gpukit_asr.h — speech recognition (ABI 1.11): Whisper models through gk_model (the
 * encoder step of a session) and transcription of 16 kHz audio to text with segments.
 *
 * C99. Included by gpukit.h, so a client includes gpukit.h alone; including this header
 * first works as well (it includes gpukit.h). See docs/asr.md.
 *
 * A Whisper model is loaded with gk_model_load from a folder in HF's layout
 * (config.json with architectures ["WhisperForConditionalGeneration"], model.safetensors,
 * tokenizer.json, generation_config.json; tools/convert_whisper_ct2.py writes one).
 */
#ifndef GPUKIT_GPUKIT_ASR_H_
#define GPUKIT_GPUKIT_ASR_H_

#include "gpukit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Runs the model's encoder on `features`, f32 [n_mels, frames] row-major on the host
 * (Whisper's log-mel spectrogram; frames in 1 .. 2 x max_source_positions, 3000 for a 30 s
 * window), and keeps in the session what the decoder attends to. The session starts a new
 * sequence (its length goes back to 0): gk_session_step then takes the decoder's tokens.
 * When `out` is not NULL it receives the encoder's output f32 [(frames + 1) / 2,
 * hidden_size] (gk_model_info). INVALID_ARGUMENT for n_mels or frames the model does not
 * take; UNIMPLEMENTED for a model without an encoder. One thread per session at a time. */
GK_API gk_status gk_session_encode(gk_session* session, const float* features, int32_t n_mels,
                                   int64_t frames, float* out);

/* What gk_model_get_encoder_info reports: 0 everywhere for a model without an encoder. */
typedef struct gk_encoder_info {
  size_t struct_size; /* sizeof(gk_encoder_info), set by the caller */
  int32_t n_mels;     /* rows of the features gk_session_encode takes */
  int64_t max_frames; /* the most frames it takes (Whisper: 3000, 30 s) */
} gk_encoder_info;

#define GK_ENCODER_INFO_SIZE GK_STRUCT_SIZE(gk_encoder_info, max_frames)

/* Describes the model's encoder. Any thread. */
GK_API gk_status gk_model_get_encoder_info(const gk_model* model, gk_encoder_info* out);

/* ---------------------------------------------------------------------------------
 * Transcription: Whisper's decoding over 30 s windows.
 * ------------------------------------------------------------------------------- */

typedef struct gk_transcript gk_transcript;

/* One segment of a transcript. Pointers stay valid while the transcript lives (for
 * on_segment: during the callback). */
typedef struct gk_transcript_segment {
  size_t struct_size;     /* sizeof(gk_transcript_segment), set by the caller */
  double start;           /* seconds from the start of the audio */
  double end;
  const char* text;       /* UTF-8, as Whisper writes it (usually a leading space) */
  double avg_logprob;     /* mean log-probability of the window's sampled tokens */
  double no_speech_prob;  /* probability of <|nospeech|> at the window's first step */
  const int32_t* tokens;  /* the segment's text tokens (no timestamps) */
  int32_t num_tokens;
} gk_transcript_segment;

#define GK_TRANSCRIPT_SEGMENT_SIZE GK_STRUCT_SIZE(gk_transcript_segment, num_tokens)

/* Called once per finished segment, in order; a non-zero return stops the transcription
 * after this segment (what was found so far is the transcript). */
typedef int32_t (*gk_segment_fn)(void* user_data, const gk_transcript_segment* segment);

typedef struct gk_transcribe_options {
  size_t struct_size;            /* sizeof(gk_transcribe_options) */
  const char* language;          /* "en", "de", …; NULL: detected (multilingual models) */
  int32_t beam_size;             /* at temperature 0: 1 greedy, > 1 beam search (0 means 1) */
  float temperature;             /* the first temperature: 0 greedy or beam, > 0 sampling */
  int32_t without_timestamps;    /* 1: one segment per window, no timestamp tokens */
  float no_speech_threshold;     /* skip a window above this no-speech probability… */
  float logprob_threshold;       /* …when its average log-probability is below this; also a
                                    fallback threshold (below it: decode again) */
  gk_segment_fn on_segment;      /* may be NULL */
  void* user_data;
  /* ABI 1.12: read when struct_size covers them; an older caller gets the values after
   * "older:". */
  int32_t best_of;               /* candidates sampled per window at a temperature > 0, the
                                    likeliest kept (Whisper: 5; 0 means 5) */
  float temperature_increment;   /* fallback (Whisper: 0.2): a window whose text fails a
                                    threshold is decoded again at temperature + increment, …
                                    up to 1.0; 0: no fallback (older: 0) */
  float compression_ratio_threshold; /* fallback when the text's zlib compression ratio is
                                        above it, too repetitive (Whisper: 2.4); 0: unchecked
                                        (older: 0) */
  int32_t without_previous_text; /* 1: a window's prompt is not the text before it (Whisper's
                                    condition_on_previous_text=False; older: 0) */
  int32_t batch_size;            /* the audio is split at its quietest moments into up to
                                    batch_size parts of about 30 s or more, side by side, each
                                    step one forward pass over all (0 means 1: one after
                                    another, as Whisper; older: 1) */
  uint64_t seed;                 /* sampling at a temperature > 0: one seed, one text */
} gk_transcribe_options;

#define GK_TRANSCRIBE_OPTIONS_SIZE GK_STRUCT_SIZE(gk_transcribe_options, user_data)
#define GK_TRANSCRIBE_OPTIONS_SIZE_1_12 GK_STRUCT_SIZE(gk_transcribe_options, seed)

/* Whisper's defaults: language NULL, greedy at temperature 0 with fallback by 0.2 up to 1.0
 * (best of 5 at each), timestamps on, no-speech threshold 0.6, log-probability threshold -1,
 * compression ratio threshold 2.4, prompts with the previous text, one part at a time. */
#define GK_TRANSCRIBE_OPTIONS_INIT                                                          \
  { sizeof(gk_transcribe_options), NULL, 1, 0.0f, 0, 0.6f, -1.0f, NULL, NULL, 5, 0.2f, 2.4f, \
    0, 1, 0 }

/* Transcribes `audio`, a 1-D f32 tensor of 16 kHz mono samples on any device
 * (gk_audio_load gives one), with the Whisper `model` (its folder's tokenizer.json, or
 * without one openai-whisper's multilingual.tiktoken or gpt2.tiktoken with Whisper's special
 * tokens after its ranks, and generation_config.json are read at each call; without generation_config.json only the
 * special tokens are suppressed), as openai-whisper's transcribe() does: the audio is cut
 * in 30 s windows, each decoded with Whisper's rules (suppressed blank and suppress_tokens,
 * timestamp pairs, at most 1 s initial timestamp) by greedy or beam search (beam_size;
 * finished beams ranked by log-probability over length) or, at a temperature > 0, by
 * sampling best_of candidates; a window that fails the compression-ratio or log-probability
 * threshold is decoded again at the next temperature, and the next window starts at the
 * last timestamp. `options` may be NULL (the defaults above). *out receives a new
 * transcript; release it with gk_transcript_release. Errors: INVALID_ARGUMENT for an empty
 * or non-f32/1-D tensor, bad options (each named with its range) or a model that is not
 * Whisper. Any thread; one call per model at a time. */
GK_API gk_status gk_asr_transcribe(gk_model* model, const gk_tensor* audio,
                                   const gk_transcribe_options* options, gk_transcript** out);

/* NULL is a no-op. */
GK_API void gk_transcript_release(gk_transcript* transcript);

/* The whole text (the segments' texts joined), UTF-8; valid while the transcript lives. */
GK_API const char* gk_transcript_text(const gk_transcript* transcript);

/* The language code used ("en"); valid while the transcript lives. */
GK_API const char* gk_transcript_language(const gk_transcript* transcript);

GK_API int32_t gk_transcript_num_segments(const gk_transcript* transcript);

/* Segment `index` in [0, num_segments): OUT_OF_RANGE otherwise. */
GK_API gk_status gk_transcript_segment_at(const gk_transcript* transcript, int32_t index,
                                          gk_transcript_segment* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_ASR_H_ */
