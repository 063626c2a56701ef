/*
 * gpukit_audio.h — audio in (ABI 1.9): sound files and raw sample arrays to mono float32
 * samples at the rate a speech model wants (16000 Hz for Whisper).
 *
 * C99. Included by gpukit.h, so a client includes gpukit.h alone; including this header
 * first works as well (it includes gpukit.h).
 *
 * Files are decoded by libsndfile (WAV, FLAC, Ogg Vorbis, Ogg Opus, AIFF, and the other
 * formats of the libsndfile the library was built with) and resampled by libsoxr at its
 * high-quality setting. Multi-channel audio is mixed down to mono by averaging the channels
 * of each frame. Samples come out in [-1, 1] for integer formats (libsndfile's float
 * scaling); float formats keep their values. See docs/asr.md.
 */
#ifndef GPUKIT_GPUKIT_AUDIO_H_
#define GPUKIT_GPUKIT_AUDIO_H_

#include "gpukit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The highest sample rate accepted in or out, in Hz (the sources' and the targets'). */
#define GK_AUDIO_MAX_SAMPLE_RATE 768000
/* The largest sample magnitude accepted: samples must be finite and within
 * +-GK_AUDIO_MAX_SAMPLE_MAGNITUDE (far above any recording; float formats hold [-1, 1]). */
#define GK_AUDIO_MAX_SAMPLE_MAGNITUDE 1000000

/* Decodes the sound file at `path`, mixes it down to mono and resamples it to
 * `target_rate` Hz (0 keeps the file's own rate). *out receives a new 1-D contiguous f32
 * tensor [samples] on the cpu device (device 0), one reference owned by the caller
 * (gk_tensor_release); *out_source_rate (may be NULL) receives the file's sample rate.
 * Errors name the file and the reason: NOT_FOUND for a missing file, INVALID_ARGUMENT
 * for a file that is corrupt, in a format libsndfile does not read, holds no samples or
 * a sample out of range (see GK_AUDIO_MAX_SAMPLE_MAGNITUDE), and for a target_rate outside
 * 0..GK_AUDIO_MAX_SAMPLE_RATE; RESOURCE_EXHAUSTED when the result would pass 2^31 samples
 * (about 37 hours at 16 kHz). Any thread. (ABI 1.9) */
GK_API gk_status gk_audio_load(gk_runtime* runtime, const char* path, int32_t target_rate,
                               int32_t* out_source_rate, gk_tensor** out);

/* The same from samples in memory: `frames` frames of `channels` interleaved float
 * samples (frame-major: samples[frame * channels + channel]) at `sample_rate` Hz, mixed
 * down to mono and resampled to `target_rate` Hz (0 keeps `sample_rate`). The samples are
 * read during the call only. *out receives a new 1-D contiguous f32 tensor on the cpu
 * device, owned by the caller. INVALID_ARGUMENT names the argument for frames < 1,
 * channels outside 1..1024, a rate outside 1..GK_AUDIO_MAX_SAMPLE_RATE, or a sample
 * that is not finite or passes GK_AUDIO_MAX_SAMPLE_MAGNITUDE. Any thread. (ABI 1.9) */
GK_API gk_status gk_audio_from_samples(gk_runtime* runtime, const float* samples, int64_t frames,
                                       int32_t channels, int32_t sample_rate,
                                       int32_t target_rate, gk_tensor** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUKIT_GPUKIT_AUDIO_H_ */
