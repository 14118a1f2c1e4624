// A minimal work-sharing loop for the reference executor: indices handed out through an atomic counter to
// one thread per hardware core; the first exception thrown by any worker is rethrown to the caller.
#pragma once
#include <cstddef>
#include <functional>

namespace lab::reference {

void parallel_for(size_t count, const std::function<void(size_t)>& body);

}  // namespace lab::reference
