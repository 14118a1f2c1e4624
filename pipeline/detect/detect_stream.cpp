// The detect stream: one mutex and condition variable guard the per-file slots, the free staging slots, the
// batch, save and write queues (the writer threads wait on a condition variable of their own, so that the
// many of them are not woken by every other event); every wait also wakes on a failure, so no stage can hang
// after another one threw. Host workers claim files in file order together with a staging slot, so the slots
// always hold the earliest undone files, whose batches can always complete: at most batch - 1 of them wait in
// an open batch.
#include "pipeline/detect/detect_stream.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
#include <thread>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/atomic_file.hpp"
#include "pipeline/detect/batching.hpp"

namespace lab {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Staging: a slot holds one letterboxed image; enough slots for three batches per forward worker (one in the
// forward, one complete and waiting, one filling) and one image per host worker, within kStagingBytes (never
// fewer than one batch).
constexpr size_t kStagingBytes = size_t(2) << 30;

size_t staging_slots(const DetectStreamOptions& o) {
  const size_t slot_bytes = max_input_floats(o.detector) * sizeof(float);
  const size_t wanted = size_t(3 * o.batch * o.forward_workers + o.host_threads);
  return std::max(size_t(o.batch), std::min(wanted, kStagingBytes / slot_bytes));
}

struct Slot {
  std::optional<Image> image;             // decoded, waiting for its batch (then drawn on by a save worker)
  std::optional<PreparedImage> prepared;  // its letterboxed network input, in `staging`
  float* staging = nullptr;
  std::string decode_error;               // the file could not be decoded
  bool decoded = false;
  std::optional<ImageDetections> result;  // set once the annotated image is written
};

struct Batch {
  std::vector<size_t> indices;
};

struct SaveTask {
  size_t index;
  Image image;
  ImageDetections result;
};

struct WriteTask {
  size_t index;
  std::vector<FileWrite> files;
  ImageDetections result;
};

class Stream {
 public:
  Stream(const std::vector<fs::path>& files, const DetectStreamOptions& o, const DetectStreamHooks& h)
      : files_(files),
        options_(o),
        hooks_(h),
        slots_(files.size()),
        window_(size_t(std::max(8, 4 * o.batch * o.forward_workers + 2 * o.host_threads))) {}

  std::vector<ImageDetections> run() {
    std::vector<std::thread> threads;
    for (int w = 0; w < options_.forward_workers; ++w)
      threads.emplace_back([this, w] { guarded([this, w] { forward_loop(w); }); });
    bool start = false;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || detectors_ == options_.forward_workers; });
      start = !stopping_;
    }
    if (start && hooks_.started) guarded(hooks_.started);
    for (int i = 0; i < options_.host_threads; ++i)
      threads.emplace_back([this] { guarded([this] { host_loop(); }); });
    for (int i = 0; i < options_.writer_threads; ++i)
      threads.emplace_back([this] { guarded([this] { writer_loop(); }); });
    guarded([this] { feed_and_report(); });
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    writable_.notify_all();
    for (std::thread& t : threads) t.join();
    if (failure_) std::rethrow_exception(failure_);
    return std::move(results_);
  }

 private:
  void guarded(const std::function<void()>& stage) {
    try {
      stage();
    } catch (...) {
      std::lock_guard lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
      stopping_ = true;
      changed_.notify_all();
      writable_.notify_all();
    }
  }

  // Host workers: save a finished image if one waits, else decode the next file once it is within the
  // window ahead of the reported output and a staging slot is free.
  void host_loop() {
    for (;;) {
      std::optional<SaveTask> task;
      size_t index = 0;
      float* staging = nullptr;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !saves_.empty() || can_decode(); });
        if (stopping_ && (saves_.empty() || failure_)) return;
        if (!saves_.empty()) {
          task.emplace(std::move(saves_.front()));
          saves_.pop_front();
        } else {
          index = next_decode_++;
          staging = free_staging_.back();
          free_staging_.pop_back();
        }
      }
      if (task) {
        std::vector<FileWrite> files = hooks_.save(task->image, task->result);
        std::lock_guard lock(mutex_);
        if (files.empty()) {
          slots_[task->index].result = std::move(task->result);
          changed_.notify_all();
        } else {
          writes_.push_back({task->index, std::move(files), std::move(task->result)});
          writable_.notify_one();
        }
      } else {
        decode(index, staging);
      }
    }
  }

  // Writer threads: write a saved image's files; then the image is finished.
  void writer_loop() {
    for (;;) {
      std::optional<WriteTask> task;
      {
        std::unique_lock lock(mutex_);
        writable_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
        if (stopping_ && (writes_.empty() || failure_)) return;
        task.emplace(std::move(writes_.front()));
        writes_.pop_front();
      }
      const auto start = Clock::now();
      for (const FileWrite& file : task->files) write_file_atomically(file.path, file.content);
      if (options_.profile)
        options_.profile->add(Stage::Write, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      std::lock_guard lock(mutex_);
      slots_[task->index].result = std::move(task->result);
      changed_.notify_all();
    }
  }

  bool can_decode() const {
    return next_decode_ < files_.size() && next_decode_ < reported_ + window_ && !free_staging_.empty();
  }

  // Decodes file `index` and letterboxes it into `staging`. A file that cannot be decoded or letterboxed (or
  // whose pixels do not fit in memory) is skipped with its reason; the stream goes on with the others.
  void decode(size_t index, float* staging) {
    std::optional<Image> image;
    std::optional<PreparedImage> prepared;
    std::string error;
    double decode_ms = 0;
    try {
      const auto start = Clock::now();
      image = decode_image(files_[index]);
      decode_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      prepared = prepare_image(*image, files_[index].string(), options_.detector, staging, device_letterbox_);
    } catch (const UsageError& e) {
      error = e.what();
    } catch (const std::bad_alloc&) {
      error = printable_path(files_[index]) + ": cannot read image (out of memory)";
    }
    if (options_.profile && error.empty()) {
      options_.profile->add(Stage::Decode, decode_ms);
      options_.profile->add(Stage::Letterbox, prepared->preprocess_ms);
    }
    if (!error.empty()) image.reset(), prepared.reset();
    std::lock_guard lock(mutex_);
    if (prepared)
      slots_[index].staging = staging;
    else
      free_staging_.push_back(staging);
    slots_[index].image = std::move(image);
    slots_[index].prepared = std::move(prepared);
    slots_[index].decode_error = std::move(error);
    slots_[index].decoded = true;
    changed_.notify_all();
  }

  // Forward workers: one Detector each, made on this thread; the first also allocates the staging slots.
  void forward_loop(int worker) {
    const std::unique_ptr<Detector> detector = hooks_.make_detector(worker);
    detector->prepare(options_.prepare);
    const size_t slots = worker == 0 ? staging_slots(options_) : 0, floats = max_input_floats(options_.detector);
    HostBuffer staging = detector->alloc_staging(slots * floats * sizeof(float));
    {
      std::lock_guard lock(mutex_);
      if (worker == 0) {
        device_letterbox_ = detector->letterboxes_on_device();
        staging_ = std::move(staging);
        for (size_t k = slots; k-- > 0;) free_staging_.push_back(staging_.as<float>() + k * floats);
      }
      ++detectors_;
      changed_.notify_all();
    }
    for (;;) {
      Batch batch;
      std::vector<Image> images;
      std::vector<PreparedImage> prepared;
      std::vector<float*> staging;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return stopping_ || !batches_.empty() || batches_closed_; });
        if (stopping_ || batches_.empty()) return;
        batch = std::move(batches_.front());
        batches_.pop_front();
        for (size_t i : batch.indices) {
          images.push_back(std::move(*slots_[i].image));
          prepared.push_back(std::move(*slots_[i].prepared));
          staging.push_back(slots_[i].staging);
          slots_[i].image.reset();
          slots_[i].prepared.reset();
          slots_[i].staging = nullptr;
        }
      }
      std::vector<const PreparedImage*> pointers;
      std::vector<std::string> names;
      for (const PreparedImage& p : prepared) {
        pointers.push_back(&p);
        names.push_back(p.file);
      }
      std::vector<ImageDetections> results = detector->detect(pointers);
      if (options_.profile)
        for (const ImageDetections& r : results) {
          options_.profile->add(Stage::Upload, r.times.upload_ms);
          options_.profile->add(Stage::Forward, r.times.inference_ms - r.times.upload_ms);
          options_.profile->add(Stage::TopK, r.times.postprocess_ms);
        }
      if (hooks_.after_forward) hooks_.after_forward(*detector, names);
      std::lock_guard lock(mutex_);
      free_staging_.insert(free_staging_.end(), staging.begin(), staging.end());  // uploaded: refill them
      for (size_t k = 0; k < images.size(); ++k)
        saves_.push_back({batch.indices[k], std::move(images[k]), std::move(results[k])});
      changed_.notify_all();
    }
  }

  // The calling thread: forms batches in file order and reports finished files in file order.
  void feed_and_report() {
    Batch pending;
    LetterboxGeometry pending_shape;
    const auto flush = [&] {
      if (pending.indices.empty()) return;
      std::lock_guard lock(mutex_);
      batches_.push_back(std::move(pending));
      pending = {};
      changed_.notify_all();
    };
    for (size_t i = 0; i < files_.size(); ++i) {
      if (hooks_.progress) hooks_.progress(i, files_.size(), files_[i].filename().string());
      // Report what finished while waiting for file i: its decode may wait for the window to move.
      std::unique_lock lock(mutex_);
      for (;;) {
        lock.unlock();
        report_ready(false, i);
        lock.lock();
        changed_.wait(lock,
                      [&] { return stopping_ || slots_[i].decoded || (reported_ < i && ready(reported_)); });
        if (stopping_) return;
        if (slots_[i].decoded) break;
      }
      if (!slots_[i].image) continue;
      const LetterboxGeometry shape = slots_[i].prepared->geometry;
      lock.unlock();
      if (!pending.indices.empty() &&
          !joins_batch(pending_shape, pending.indices.size(), shape, options_.batch))
        flush();
      pending_shape = shape;
      pending.indices.push_back(i);
    }
    flush();
    {
      std::lock_guard lock(mutex_);
      batches_closed_ = true;
    }
    changed_.notify_all();
    report_ready(true, files_.size());
  }

  // Reports files in order while they are finished (or skipped); with `wait_all`, until every file is.
  // `limit`: files from here on are not decoded yet (not waited for unless wait_all).
  void report_ready(bool wait_all, size_t limit) {
    for (;;) {
      std::unique_lock lock(mutex_);
      if (wait_all)
        changed_.wait(lock, [&] { return stopping_ || reported_ >= files_.size() || ready(reported_); });
      if (stopping_ || reported_ >= std::min(limit, files_.size()) || !ready(reported_)) return;
      const size_t index = reported_++;
      Slot& slot = slots_[index];
      changed_.notify_all();  // the decode window moved
      lock.unlock();
      if (slot.result) {
        hooks_.finished(*slot.result);
        results_.push_back(std::move(*slot.result));
        slot.result.reset();
      } else {
        hooks_.skipped(files_[index].string(), slot.decode_error);
      }
    }
  }

  bool ready(size_t index) const {
    const Slot& s = slots_[index];
    return s.result.has_value() || (s.decoded && !s.decode_error.empty());
  }

  const std::vector<fs::path>& files_;
  const DetectStreamOptions& options_;
  const DetectStreamHooks& hooks_;
  std::vector<Slot> slots_;
  const size_t window_;  // decoded or in-flight images ahead of the reported output

  HostBuffer staging_;                // the slots, allocated by forward worker 0's Detector
  bool device_letterbox_ = false;     // the slots take staged letterboxes (its network letterboxes them)
  std::vector<float*> free_staging_;  // slots no file holds

  std::mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable writable_;  // writes_ grew, or stopping: only the writer threads wait on it
  size_t next_decode_ = 0, reported_ = 0;
  int detectors_ = 0;  // forward workers whose Detector exists
  std::deque<Batch> batches_;
  bool batches_closed_ = false;
  std::deque<SaveTask> saves_;
  std::deque<WriteTask> writes_;
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::vector<ImageDetections> results_;
};

}  // namespace

std::vector<ImageDetections> run_detect_stream(const std::vector<fs::path>& files,
                                               const DetectStreamOptions& options,
                                               const DetectStreamHooks& hooks) {
  if (options.batch < 1 || options.forward_workers < 1 || options.host_threads < 1)
    throw UsageError("detect stream: batch and worker counts must be at least 1");
  return Stream(files, options, hooks).run();
}

}  // namespace lab
