// The fiber scheduler of one block: resumes fibers warp by warp, completes warp collectives in lockstep,
// releases block barriers, and turns every way a block can get stuck into an error message.
#include "nvrtc_runtime/cpu/block_scheduler.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace lab::cpu {

namespace ctx = boost::context::detail;

namespace {

constexpr unsigned kWarp = 32;

const char* block_op_name(int op) {
  switch (op) {
    case LAB_EMU_SYNCTHREADS_COUNT:
      return "__syncthreads_count";
    case LAB_EMU_SYNCTHREADS_AND:
      return "__syncthreads_and";
    case LAB_EMU_SYNCTHREADS_OR:
      return "__syncthreads_or";
    default:
      return "__syncthreads";
  }
}

const char* warp_op_name(int op) {
  switch (op) {
    case LAB_EMU_SHFL_IDX:
      return "__shfl_sync";
    case LAB_EMU_SHFL_UP:
      return "__shfl_up_sync";
    case LAB_EMU_SHFL_DOWN:
      return "__shfl_down_sync";
    case LAB_EMU_SHFL_XOR:
      return "__shfl_xor_sync";
    case LAB_EMU_BALLOT:
      return "__ballot_sync";
    case LAB_EMU_ANY:
      return "__any_sync";
    case LAB_EMU_ALL:
      return "__all_sync";
    default:
      return "__syncwarp";
  }
}

std::string location(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

std::string hex_mask(unsigned mask) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", mask);
  return buf;
}

std::string dim_text(const lab_emu_dim3& d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}

}  // namespace

BlockScheduler::BlockScheduler() : fibers_(kMaxThreads) {}

const lab_emu_host_api& BlockScheduler::host_api() {
  static const lab_emu_host_api api{LAB_EMU_ABI_VERSION, &api_block_sync, &api_warp_sync,
                                    &api_active_mask,    &api_fail,       &api_yield};
  return api;
}

std::string BlockScheduler::run(const lab_emu_kernel& kernel, void* const* args, const lab_emu_block& block) {
  const unsigned bx = block.block_dim.x, by = block.block_dim.y;
  const unsigned n = bx * by * block.block_dim.z;
  stacks_.reserve(n);
  if (parked_.size() < n) parked_.resize(n, nullptr);
  // After an error or a fault, slots may hold contexts stopped inside a kernel: start those afresh.
  if (block_in_progress_) std::fill(parked_.begin(), parked_.end(), nullptr);
  block_in_progress_ = true;
  count_progress();
  kernel_ = &kernel;
  args_ = args;
  block_ = &block;
  thread_count_ = n;
  exited_ = 0;
  stalled_rounds_ = 0;
  error_.clear();
  free_stacks_.clear();
  for (unsigned i = n; i-- > 0;) free_stacks_.push_back(i);
  unsigned i = 0;
  for (unsigned z = 0; z < block.block_dim.z; ++z)
    for (unsigned y = 0; y < by; ++y)
      for (unsigned x = 0; x < bx; ++x, ++i) {
        Fiber& f = fibers_[i];
        f.abi = lab_emu_thread{{x, y, z}, i, &block};
        f.scheduler = this;
        f.state = State::Runnable;
        f.context = nullptr;
      }
  const unsigned warps = (n + kWarp - 1) / kWarp;
  for (;;) {
    for (unsigned w = 0; w < warps; ++w) {
      const unsigned lo = w * kWarp, hi = std::min(n, lo + kWarp);
      for (;;) {
        bool at_collective = false;
        for (unsigned i = lo; i < hi; ++i) {
          if (fibers_[i].state != State::Runnable) continue;
          resume(fibers_[i]);
          if (fibers_[i].state == State::Failed) return error_;
          at_collective |= fibers_[i].state == State::AtWarp;
        }
        if (!at_collective || !complete_warp_collectives(w)) break;
      }
      if (!error_.empty()) return error_;
    }
    if (exited_ == n) {
      block_in_progress_ = false;
      return {};
    }
    const bool yielded = std::any_of(fibers_.begin(), fibers_.begin() + n,
                                     [](const Fiber& f) { return f.state == State::Yielded; });
    if (!yielded) stalled_rounds_ = 0;
    if (yielded ? !wake_yielded() : !release_block_barrier()) return error_;
  }
}

lab_emu_dim3 BlockScheduler::running_thread() const {
  return fibers_[running_.load(std::memory_order_relaxed)].abi.thread_idx;
}

void BlockScheduler::resume(Fiber& f) {
  running_.store(f.abi.linear_idx, std::memory_order_relaxed);
  if (!f.context) {
    f.stack = free_stacks_.back();
    free_stacks_.pop_back();
    f.context = parked_[f.stack]
                    ? parked_[f.stack]
                    : ctx::make_fcontext(stacks_.top(f.stack), FiberStacks::kStackBytes, &fiber_main);
    parked_[f.stack] = nullptr;
  }
  ctx::transfer_t t = ctx::jump_fcontext(f.context, &f);
  f.context = t.fctx;
  if (f.state == State::Exited) {
    ++exited_;
    count_progress();
    parked_[f.stack] = t.fctx;
    free_stacks_.push_back(f.stack);
  }
}

void BlockScheduler::yield_to_scheduler() {
  ctx::transfer_t t = ctx::jump_fcontext(scheduler_context_, nullptr);
  scheduler_context_ = t.fctx;
}

void BlockScheduler::fiber_main(ctx::transfer_t t) {
  // One pass per CUDA thread: the scheduler hands over the next thread (t.data) when it resumes a parked
  // slot.
  for (;;) {
    Fiber& f = *static_cast<Fiber*>(t.data);
    BlockScheduler& s = *f.scheduler;
    s.scheduler_context_ = t.fctx;
    try {
      s.kernel_->run(&f.abi, s.args_);
      f.state = State::Exited;
    } catch (...) {
      s.error_ = "thread " + dim_text(f.abi.thread_idx) + ": the kernel threw a C++ exception";
      f.state = State::Failed;
    }
    t = ctx::jump_fcontext(s.scheduler_context_, nullptr);
  }
}

int BlockScheduler::api_block_sync(lab_emu_thread* self, int op, int predicate, const char* file, int line) {
  Fiber& f = fiber_of(self);
  f.state = State::AtBarrier;
  f.site = {op, file, line};
  f.value = predicate != 0;
  f.scheduler->yield_to_scheduler();
  return int(f.result);
}

unsigned long long BlockScheduler::api_warp_sync(lab_emu_thread* self, int op, unsigned mask,
                                                 unsigned long long value, int lane_arg, int width,
                                                 const char* file, int line) {
  Fiber& f = fiber_of(self);
  f.state = State::AtWarp;
  f.site = {op, file, line};
  f.mask = mask;
  f.value = value;
  f.lane_arg = lane_arg;
  f.width = width;
  f.scheduler->yield_to_scheduler();
  return f.result;
}

unsigned BlockScheduler::api_active_mask(lab_emu_thread* self) {
  return fiber_of(self).scheduler->live_lanes(self->linear_idx / kWarp);
}

void BlockScheduler::api_fail(lab_emu_thread* self, const char* message, const char* file, int line) {
  Fiber& f = fiber_of(self);
  BlockScheduler& s = *f.scheduler;
  s.error_ = "thread " + dim_text(f.abi.thread_idx) + " at " + location(file, line) + ": " + message;
  f.state = State::Failed;
  s.yield_to_scheduler();
  std::abort();  // a failed fiber is never resumed
}

void BlockScheduler::api_yield(lab_emu_thread* self, const unsigned long long* watch, unsigned long long seen,
                               const char* file, int line) {
  Fiber& f = fiber_of(self);
  f.state = State::Yielded;
  f.site = {0, file, line};
  f.watch = watch;
  f.seen = seen;
  f.scheduler->yield_to_scheduler();
}

bool BlockScheduler::wake_yielded() {
  bool changed = false;
  for (unsigned i = 0; i < thread_count_ && !changed; ++i)
    changed = fibers_[i].state == State::Yielded && *fibers_[i].watch != fibers_[i].seen;
  // A round without change: the waiters' try_wait returns false once more (a caller may do something else
  // then); a second such round in a row, with every waiter back at an unchanged mbarrier, is a deadlock.
  stalled_rounds_ = changed ? 0 : stalled_rounds_ + 1;
  if (stalled_rounds_ == 2) {
    error_ =
        "barrier deadlock: every thread of the block waits and no mbarrier or named barrier it waits on can "
        "change:" +
        describe_block();
    return false;
  }
  for (unsigned i = 0; i < thread_count_; ++i)
    if (fibers_[i].state == State::Yielded) fibers_[i].state = State::Runnable;
  if (changed) count_progress();
  return true;
}

unsigned BlockScheduler::live_lanes(unsigned warp) const {
  const unsigned lo = warp * kWarp, hi = std::min(thread_count_, lo + kWarp);
  unsigned mask = 0;
  for (unsigned i = lo; i < hi; ++i)
    if (fibers_[i].state != State::Exited) mask |= 1u << (i - lo);
  return mask;
}

bool BlockScheduler::complete_warp_collectives(unsigned warp) {
  const unsigned lo = warp * kWarp, hi = std::min(thread_count_, lo + kWarp);
  const unsigned live = live_lanes(warp);
  unsigned handled = 0;
  bool released = false;
  for (unsigned i = lo; i < hi; ++i) {
    const unsigned lane = i - lo;
    const Fiber& f = fibers_[i];
    if (f.state != State::AtWarp || (handled >> lane & 1u)) continue;
    auto where = [&f] {
      return "thread " + dim_text(f.abi.thread_idx) + " calls " + warp_op_name(f.site.op) + " at " +
             location(f.site.file, f.site.line);
    };
    if (!(f.mask >> lane & 1u)) {
      error_ = where() + " with mask " + hex_mask(f.mask) + ", which leaves out its own lane " +
               std::to_string(lane);
      return false;
    }
    if (f.width < 1 || f.width > int(kWarp) || (f.width & (f.width - 1)) != 0) {
      error_ = where() + " with width " + std::to_string(f.width) + " (must be a power of two from 1 to 32)";
      return false;
    }
    const unsigned participants = f.mask & live;
    bool complete = true;
    for (unsigned b = 0; b < kWarp && complete; ++b)
      if (participants >> b & 1u)
        complete = fibers_[lo + b].state == State::AtWarp && fibers_[lo + b].mask == f.mask;
    if (!complete) continue;
    for (unsigned b = 0; b < kWarp; ++b) {
      const Fiber& g = fibers_[lo + b];
      if ((participants >> b & 1u) && g.site.op != f.site.op) {
        error_ = "warp collective mismatch: " + where() + " while thread " + dim_text(g.abi.thread_idx) +
                 " calls " + warp_op_name(g.site.op) + " at " + location(g.site.file, g.site.line) +
                 " with the same mask " + hex_mask(f.mask);
        return false;
      }
    }
    complete_collective(warp, participants);
    handled |= participants;
    released = true;
  }
  return released;
}

void BlockScheduler::complete_collective(unsigned warp, unsigned participants) {
  const unsigned lo = warp * kWarp;
  uint64_t values[kWarp] = {};
  unsigned ballot = 0;
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    if (!(participants >> lane & 1u)) continue;
    values[lane] = fibers_[lo + lane].value;
    if (values[lane] != 0) ballot |= 1u << lane;
  }
  for (unsigned lane = 0; lane < kWarp; ++lane) {
    if (!(participants >> lane & 1u)) continue;
    Fiber& g = fibers_[lo + lane];
    const long long width = g.width, segment = lane & ~unsigned(g.width - 1);
    long long src = lane;
    switch (g.site.op) {
      case LAB_EMU_SHFL_IDX:
        src = segment + (g.lane_arg & (g.width - 1));
        break;
      case LAB_EMU_SHFL_UP:
        src = (long long)lane - (long long)unsigned(g.lane_arg);
        if (src < segment) src = lane;
        break;
      case LAB_EMU_SHFL_DOWN:
        src = (long long)lane + (long long)unsigned(g.lane_arg);
        if (src >= segment + width) src = lane;
        break;
      case LAB_EMU_SHFL_XOR:
        src = (long long)(lane ^ unsigned(g.lane_arg));
        if (src >= kWarp || src / width > lane / width) src = lane;
        break;
      default:
        break;
    }
    switch (g.site.op) {
      case LAB_EMU_BALLOT:
        g.result = ballot;
        break;
      case LAB_EMU_ANY:
        g.result = ballot != 0;
        break;
      case LAB_EMU_ALL:
        g.result = ballot == participants;
        break;
      case LAB_EMU_SYNCWARP:
        g.result = 0;
        break;
      // A source lane outside the collective has no defined value on the GPU; the caller keeps its own.
      default:
        g.result = (participants >> src & 1u) ? values[src] : values[lane];
        break;
    }
    g.state = State::Runnable;
  }
}

bool BlockScheduler::release_block_barrier() {
  const Fiber* first = nullptr;
  bool same_barrier = true;
  unsigned count = 0;
  for (unsigned i = 0; i < thread_count_; ++i) {
    const Fiber& f = fibers_[i];
    if (f.state == State::AtWarp) {
      error_ = describe_warp_deadlock(i / kWarp, f);
      return false;
    }
    if (f.state != State::AtBarrier) continue;
    count += unsigned(f.value);
    if (!first) {
      first = &f;
    } else if (f.site.op != first->site.op || f.site.line != first->site.line ||
               (f.site.file != first->site.file && std::strcmp(f.site.file, first->site.file) != 0)) {
      same_barrier = false;
    }
  }
  if (exited_ > 0 || !same_barrier) {
    error_ = "barrier divergence at " + location(first->site.file, first->site.line) + ":" + describe_block();
    return false;
  }
  uint64_t result = 0;
  switch (first->site.op) {
    case LAB_EMU_SYNCTHREADS_COUNT:
      result = count;
      break;
    case LAB_EMU_SYNCTHREADS_AND:
      result = count == thread_count_;
      break;
    case LAB_EMU_SYNCTHREADS_OR:
      result = count > 0;
      break;
    default:
      break;
  }
  for (unsigned i = 0; i < thread_count_; ++i) {
    fibers_[i].result = result;
    fibers_[i].state = State::Runnable;
  }
  count_progress();
  return true;
}

std::string BlockScheduler::describe_threads(const std::vector<unsigned>& linear) const {
  const bool multi_dim = block_->block_dim.y * block_->block_dim.z > 1;
  std::string s = linear.size() == 1 ? "thread " : "threads ";
  if (multi_dim) s += "(linear index) ";
  size_t ranges = 0;
  for (size_t i = 0; i < linear.size();) {
    size_t j = i;
    while (j + 1 < linear.size() && linear[j + 1] == linear[j] + 1) ++j;
    if (ranges == 8) {
      s += ", ... (" + std::to_string(linear.size()) + " threads in all)";
      break;
    }
    s += (ranges ? ", " : "") + std::to_string(linear[i]);
    if (j > i) s += "-" + std::to_string(linear[j]);
    ++ranges;
    i = j + 1;
  }
  return s;
}

// " threads 0-31 wait at ...; threads 32-63 have exited": every thread, grouped by what it does.
std::string BlockScheduler::describe_block() const {
  std::map<std::string, std::vector<unsigned>> groups;
  for (unsigned i = 0; i < thread_count_; ++i) groups[describe_waiting(fibers_[i])].push_back(i);
  std::vector<std::pair<unsigned, std::string>> ordered;  // by first thread
  for (auto& [what, threads] : groups)
    ordered.push_back({threads.front(), describe_threads(threads) + " " + what});
  std::sort(ordered.begin(), ordered.end());
  std::string s;
  for (size_t k = 0; k < ordered.size(); ++k) s += (k ? "; " : " ") + ordered[k].second;
  return s;
}

std::string BlockScheduler::describe_waiting(const Fiber& f) const {
  switch (f.state) {
    case State::AtBarrier:
      return std::string("wait at ") + block_op_name(f.site.op) + " (" + location(f.site.file, f.site.line) +
             ")";
    case State::AtWarp:
      return std::string("wait at ") + warp_op_name(f.site.op) + " (" + location(f.site.file, f.site.line) +
             ", mask " + hex_mask(f.mask) + ")";
    case State::Yielded: {
      const unsigned long long w = f.seen;
      if (LAB_EMU_NBAR_TAGGED(w))
        return "wait at named barrier " + std::to_string(LAB_EMU_NBAR_ID(w)) + " (" +
               location(f.site.file, f.site.line) + ") with " + std::to_string(LAB_EMU_NBAR_ARRIVED(w)) +
               " of " + std::to_string(LAB_EMU_NBAR_COUNT(w)) + " threads arrived";
      if (!LAB_EMU_MBAR_VALID(w))
        return "wait on an uninitialised mbarrier (" + location(f.site.file, f.site.line) + ")";
      return "wait on an mbarrier (" + location(f.site.file, f.site.line) + ") in phase " +
             std::to_string(LAB_EMU_MBAR_PHASE(w)) + " with " + std::to_string(LAB_EMU_MBAR_PENDING(w)) +
             " of " + std::to_string(LAB_EMU_MBAR_EXPECTED(w)) + " arrivals and " +
             std::to_string(LAB_EMU_MBAR_TX(w)) + " transaction bytes pending";
    }
    case State::Exited:
      return "have exited";
    default:
      return "are running";
  }
}

std::string BlockScheduler::describe_warp_deadlock(unsigned warp, const Fiber& waiting) const {
  const unsigned lo = warp * kWarp, hi = std::min(thread_count_, lo + kWarp);
  std::vector<unsigned> group;
  std::map<std::string, std::vector<unsigned>> missing;
  for (unsigned i = lo; i < hi; ++i) {
    const Fiber& g = fibers_[i];
    if (!(waiting.mask >> (i - lo) & 1u) || g.state == State::Exited) continue;
    if (g.state == State::AtWarp && g.mask == waiting.mask)
      group.push_back(i);
    else
      missing[describe_waiting(g)].push_back(i);
  }
  std::string s =
      "warp collective never completes: " + describe_threads(group) + " " + describe_waiting(waiting);
  for (auto& [what, threads] : missing) s += "; " + describe_threads(threads) + " of its mask " + what;
  return s;
}

}  // namespace lab::cpu
