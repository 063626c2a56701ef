#include "common/thread_state.h"

namespace gk {

constinit thread_local ThreadState thread_state;

}  // namespace gk
