// TrainLoader: the epoch's shuffle, the worker threads that prepare its images a few batches ahead, and the
// batches assembled from them in order.
#include "pipeline/train/train_loader.hpp"

#include <algorithm>

#include "nvrtc_runtime/errors.hpp"
#include "nvrtc_runtime/printable_text.hpp"
#include "pipeline/image/letterbox.hpp"
#include "pipeline/train/augment_pipeline.hpp"

namespace lab::train {
namespace {

constexpr size_t kBatchesAhead = 2;  // how far the workers may run ahead of next()

// A seed that shares no stretch of its SplitMix64 stream with the seeds of neighbouring (key, value) pairs.
uint64_t mixed_seed(uint64_t key, uint64_t value) {
  return dataset::SynthRandom(key ^ (value * 0xd1b54a32d192ed03ULL)).next();
}

}  // namespace

TrainLoader::TrainLoader(const dataset::Split& split, int imgsz, int batch, AugmentSettings augment,
                         int workers, uint64_t seed, RankShard shard)
    : samples_(split.samples),
      report_(split.report),
      imgsz_(imgsz),
      batch_(batch),
      augment_(augment),
      seed_(seed),
      positions_(shard_positions(split.samples.size(), shard)),
      reported_(split.samples.size(), 0) {
  if (samples_.empty()) throw UsageError("no usable images to train on (" + report_.summary() + ")");
  if (imgsz < 1) throw UsageError("--imgsz " + std::to_string(imgsz) + ": must be at least 1");
  if (batch < 1) throw UsageError("--batch " + std::to_string(batch) + ": must be at least 1");
  if (workers < 0) throw UsageError("--workers " + std::to_string(workers) + ": must be at least 0");
  check_augment_settings(augment);
  for (int k = 0; k < workers; ++k) threads_.emplace_back([this] { work(); });
}

TrainLoader::~TrainLoader() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TrainLoader::start_epoch(int epoch, int epochs) {
  {
    std::unique_lock lock(mutex_);
    // Images still being prepared write into buffers_: let them finish, then drop the previous epoch's work.
    item_done_.wait(lock, [&] { return in_flight_ == 0; });
    epoch_key_ = mixed_seed(seed_, uint64_t(epoch));
    mosaic_ = augment_.mosaic > 0 && epoch < epochs - augment_.close_mosaic;
    std::vector<size_t> shuffle(samples_.size());
    for (size_t k = 0; k < shuffle.size(); ++k) shuffle[k] = k;
    dataset::SynthRandom random(epoch_key_);
    for (size_t k = shuffle.size(); k > 1; --k) std::swap(shuffle[k - 1], shuffle[random.next() % k]);
    order_.resize(positions_.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = shuffle[positions_[k] % shuffle.size()];
    items_.assign(order_.size(), Item{});
    buffers_.clear();
    next_claim_ = next_batch_ = 0;
    started_ = true;
  }
  work_ready_.notify_all();
}

size_t TrainLoader::batches_per_epoch() const {
  return (positions_.size() + size_t(batch_) - 1) / size_t(batch_);
}

const dataset::SplitReport& TrainLoader::report() const {
  return report_;
}

void TrainLoader::on_warning(std::function<void(const std::string&)> warn) {
  warn_ = std::move(warn);
}

void TrainLoader::pass_over_together(std::function<bool(bool empty_here)> any_rank_empty) {
  any_rank_empty_ = std::move(any_rank_empty);
}

void TrainLoader::stage_batches_in(std::function<HostBuffer(size_t)> allocate) {
  std::lock_guard lock(mutex_);
  if (started_ || staging_) throw RuntimeError("train loader: staging memory is set once, before the first epoch");
  staging_ = std::make_unique<HostMemoryPool>(std::move(allocate));
}

size_t TrainLoader::image_bytes() const {
  return size_t(3) * size_t(imgsz_) * size_t(imgsz_);
}

uint8_t* TrainLoader::batch_slot(size_t position) {
  const size_t batch = position / size_t(batch_);
  std::pmr::vector<uint8_t>& buffer =
      buffers_.try_emplace(batch, staging_ ? staging_.get() : std::pmr::get_default_resource()).first->second;
  if (buffer.empty()) {  // (still empty after an allocation that failed: tried again)
    const size_t end = std::min((batch + 1) * size_t(batch_), order_.size());
    buffer.resize((end - batch * size_t(batch_)) * image_bytes());
  }
  return buffer.data() + (position % size_t(batch_)) * image_bytes();
}

TrainLoader::Item TrainLoader::prepare(size_t sample, uint64_t item_seed, bool mosaic, uint8_t* pixels) const {
  Item item;
  const SampleSource source = [&](size_t index) -> std::optional<LabeledImage> {
    const dataset::Sample& s = samples_[index];
    try {
      return load_resized(decode_image(s.image), s.labels, imgsz_);
    } catch (const UsageError& e) {
      item.undecodable.emplace_back(index, e.what());
      return std::nullopt;
    }
  };
  try {
    dataset::SynthRandom random(item_seed);
    if (std::optional<LabeledImage> image =
            augment_sample(sample, samples_.size(), source, augment_, mosaic, imgsz_, random)) {
      if (image->image.rgb.size() != image_bytes())
        throw RuntimeError("train loader: an augmented image of " + std::to_string(image->image.width) + "x" +
                           std::to_string(image->image.height) + ", not " + std::to_string(imgsz_) + " square");
      std::copy(image->image.rgb.begin(), image->image.rgb.end(), pixels);
      item.boxes = std::move(image->boxes);
      item.decoded = true;
    }
  } catch (...) {
    item.failure = std::current_exception();
  }
  item.done = true;
  return item;
}

void TrainLoader::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [&] {
      return stopping_ || (started_ && next_claim_ < std::min(order_.size(), (next_batch_ + kBatchesAhead) *
                                                                                 size_t(batch_)));
    });
    if (stopping_) return;
    const size_t position = next_claim_++;
    const uint64_t item_seed = mixed_seed(epoch_key_, positions_[position]);
    const size_t sample = order_[position];
    const bool mosaic = mosaic_;
    Item item;
    uint8_t* pixels = nullptr;
    try {
      pixels = batch_slot(position);
    } catch (...) {  // out of memory: next() throws it
      item.failure = std::current_exception();
      item.done = true;
    }
    ++in_flight_;
    lock.unlock();
    if (pixels) item = prepare(sample, item_seed, mosaic, pixels);
    lock.lock();
    --in_flight_;
    items_[position] = std::move(item);
    item_done_.notify_all();
  }
}

void TrainLoader::note_undecodable(const Item& item) {
  for (const auto& [sample, reason] : item.undecodable) {
    if (reported_[sample]) continue;
    reported_[sample] = 1;
    ++undecodable_;
    report_.note_undecodable(samples_[sample], reason);
    if (warn_) warn_(report_.warnings.back());
  }
}

std::optional<TrainBatch> TrainLoader::next() {
  for (;;) {
    std::vector<Item> ready;
    std::vector<std::filesystem::path> files;
    std::optional<std::pmr::vector<uint8_t>> pixels;  // moved, so it keeps the staging memory
    {
      std::unique_lock lock(mutex_);
      const size_t begin = next_batch_ * size_t(batch_);
      if (!started_ || begin >= order_.size()) return std::nullopt;
      const size_t end = std::min(begin + size_t(batch_), order_.size());
      if (threads_.empty())
        for (size_t position = begin; position < end; ++position)
          items_[position] = prepare(order_[position], mixed_seed(epoch_key_, positions_[position]), mosaic_,
                                     batch_slot(position));
      else
        item_done_.wait(lock, [&] {
          return std::all_of(items_.begin() + long(begin), items_.begin() + long(end),
                             [](const Item& i) { return i.done; });
        });
      std::move(items_.begin() + long(begin), items_.begin() + long(end), std::back_inserter(ready));
      for (size_t position = begin; position < end; ++position)
        files.push_back(samples_[order_[position]].image);
      pixels.emplace(std::move(buffers_.at(next_batch_)));
      buffers_.erase(next_batch_);
      ++next_batch_;
    }
    work_ready_.notify_all();
    TrainBatch batch{.pixels = std::move(*pixels)};
    batch.height = batch.width = imgsz_;
    const size_t bytes = image_bytes();
    for (size_t k = 0; k < ready.size(); ++k) {
      Item& item = ready[k];
      if (item.failure) std::rethrow_exception(item.failure);
      note_undecodable(item);
      if (!item.decoded) continue;
      if (size_t(batch.batch) != k)  // close the gap an undecodable image left
        std::copy_n(batch.pixels.begin() + long(k * bytes), bytes,
                    batch.pixels.begin() + long(size_t(batch.batch) * bytes));
      ++batch.batch;
      batch.ground_truth.push_back(std::move(item.boxes));
      batch.files.push_back(files[k]);
    }
    batch.pixels.resize(size_t(batch.batch) * bytes);
    if (!(any_rank_empty_ ? any_rank_empty_(batch.batch == 0) : batch.batch == 0)) return batch;
    if (undecodable_ == samples_.size())
      throw UsageError(printable_path(samples_.front().image.parent_path()) + ": none of the " +
                       std::to_string(samples_.size()) + " images decodes (" + report_.warnings.back() + ")");
  }
}

}  // namespace lab::train
