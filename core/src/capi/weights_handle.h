// The gk_weights handle, shared by the weights and tokenizer entry points.
#pragma once

#include <memory>

#include "weights/weight_set.h"

struct gk_weights {
  std::unique_ptr<gk::weights::WeightSet> set;
};
