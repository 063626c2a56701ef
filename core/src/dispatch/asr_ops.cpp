// The rules of the asr ops. Attributes are read through kernels/asr/mel_params.h, the
// readers (and defaults) the plugins use, and refused here when out of range.
#include "dispatch/asr_ops.h"

#include <algorithm>
#include <string>

#include "asr/mel_params.h"

namespace gk {
namespace {

// audio [samples] or [batch, samples] f32 -> [n_mels, frames] or [batch, n_mels, frames].
OpSchema log_mel_spectrogram() {
  OpSchema s{"log_mel_spectrogram",
             {"audio"},
             1,
             {"out"},
             {{"n_mels", GK_ATTR_INT},
              {"n_fft", GK_ATTR_INT},
              {"hop_length", GK_ATTR_INT},
              {"sample_rate", GK_ATTR_INT}},
             nullptr,
             nullptr};
  s.infer = [](const OpCall& call) {
    call.require_dtype_in(0, {GK_DTYPE_F32});
    const gk_tensor_desc& audio = call.input(0);
    if (audio.ndim != 1 && audio.ndim != 2) {
      call.fail_input(0, "has shape " + shape_text(audio) +
                             "; expected [samples] or [batch, samples]");
    }
    NormalAttrs& normal = call.normal();
    const asr::MelParams p = asr::read_mel(normal.data(), normal.size());
    const asr::MelProblem problem = asr::check_mel(p);
    if (!problem.attr.empty()) call.fail_attr(problem.attr.c_str(), problem.problem);
    normal.set_int("n_mels", p.n_mels);
    normal.set_int("n_fft", p.n_fft);
    normal.set_int("hop_length", p.hop_length);
    normal.set_int("sample_rate", p.sample_rate);
    const int64_t samples = audio.shape[audio.ndim - 1];
    // Reflect padding by n_fft / 2 needs more samples than that, and one frame needs a hop.
    const int64_t least = std::max(p.n_fft / 2 + 1, p.hop_length);
    if (samples < least) {
      call.fail_input(0, "has shape " + shape_text(audio) + ": " + std::to_string(samples) +
                             " samples; at least " + std::to_string(least) +
                             " needed (more than n_fft / 2 = " + std::to_string(p.n_fft / 2) +
                             " for the reflect padding, and one hop of " +
                             std::to_string(p.hop_length) + ")");
    }
    std::vector<int64_t> out;
    if (audio.ndim == 2) out.push_back(audio.shape[0]);
    out.push_back(p.n_mels);
    out.push_back(p.frames(samples));
    return std::vector<gk_tensor_desc>{make_desc(GK_DTYPE_F32, out)};
  };
  return s;
}

}  // namespace

void add_asr_op_schemas(std::vector<OpSchema>& schemas) {
  schemas.push_back(log_mel_spectrogram());
}

}  // namespace gk
