// The training batch loader of `lab train`: each epoch a fresh shuffle of the split (from the seed and the
// epoch), each image augmented as Ultralytics trains (augment_pipeline: mosaic, random affine, HSV, flip; no
// mosaic in the last close_mosaic epochs) on worker threads that stay a few batches ahead, batches of imgsz x
// imgsz RGB bytes (TrainBatch::pixels) with their boxes in pixels (the workers write each image into its
// batch's buffer). The same (seed, epoch) gives the same batches whatever the number of workers. An image
// that does not decode is left out of its batch (which comes out short; a batch left empty is passed over)
// and counted in report() with a one-line warning naming the file; a split where no image decodes is a
// UsageError. Data-parallel training gives each rank's loader its RankShard: the rank's positions of the
// shuffle, each image augmented from its position in the whole epoch, so that the ranks together prepare what
// one rank would at the whole batch; and pass_over_together(): a batch left empty on any rank is passed over
// on every rank, so that they stay in step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc_runtime/host_memory_pool.hpp"
#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/train/augment_settings.hpp"
#include "pipeline/train/rank_shard.hpp"
#include "pipeline/train/train_engine.hpp"

namespace lab::train {

class TrainLoader {
 public:
  // workers 0 prepares the images in next() on the calling thread. `batch`: this rank's. UsageError for an
  // empty split, imgsz or batch below 1, workers below 0, settings out of range (check_augment_settings).
  TrainLoader(const dataset::Split& split, int imgsz, int batch, AugmentSettings augment, int workers,
              uint64_t seed, RankShard shard = {});
  ~TrainLoader();
  TrainLoader(const TrainLoader&) = delete;
  TrainLoader& operator=(const TrainLoader&) = delete;

  // Starts epoch `epoch` (0-based) of `epochs`: reshuffles from (seed, epoch); mosaic is off from epoch
  // epochs - close_mosaic on. Work still under way for the previous epoch is dropped.
  void start_epoch(int epoch, int epochs);
  size_t batches_per_epoch() const;  // ceil(the rank's images / batch), the last batch may be short
  // The epoch's next batch; blocks while the workers prepare it; nullopt at the epoch's end (and before the
  // first start_epoch).
  std::optional<TrainBatch> next();
  // The split's report, with the images found undecodable so far (added as next() hands their batch out).
  const dataset::SplitReport& report() const;
  // Called from next() with each new warning line (an image that does not decode).
  void on_warning(std::function<void(const std::string&)> warn);
  // Data-parallel ranks: next() asks `any_rank_empty` with whether this rank's batch came out empty (each
  // rank's loader asks for the same batch: a collective) and passes the batch over when any rank's did, its
  // images on the other ranks too. Without it only an empty batch is passed over, and the ranks would fall
  // out of step at their collectives.
  void pass_over_together(std::function<bool(bool empty_here)> any_rank_empty);
  // Each batch's pixels are written into blocks that `allocate` makes (Backend::alloc_host: page-locked on
  // cuda) and that the loader reuses batch after batch; without it, into ordinary memory. Call once, before
  // the first start_epoch; the batches handed out must then not outlive the loader.
  void stage_batches_in(std::function<HostBuffer(size_t)> allocate);

 private:
  // One image of the epoch, prepared by a worker: its planes are written into its batch's buffer (slot
  // position % batch); here its boxes (none when it does not decode) and the samples found undecodable while
  // preparing it (it or its mosaic tiles) with the decoder's message.
  struct Item {
    bool done = false, decoded = false;
    std::vector<loss::GtBox> boxes;
    std::vector<std::pair<size_t, std::string>> undecodable;
    std::exception_ptr failure;
  };

  void work();
  Item prepare(size_t sample, uint64_t item_seed, bool mosaic, uint8_t* pixels) const;
  // Under mutex_: where position's planes go in its batch's buffer (allocated when first asked for).
  uint8_t* batch_slot(size_t position);
  void note_undecodable(const Item& item);
  size_t image_bytes() const;

  std::vector<dataset::Sample> samples_;
  dataset::SplitReport report_;
  int imgsz_, batch_;
  AugmentSettings augment_;
  uint64_t seed_;
  std::vector<size_t> positions_;  // the rank's positions in the epoch's padded shuffle (shard_positions)
  std::function<void(const std::string&)> warn_;
  std::function<bool(bool)> any_rank_empty_;
  std::vector<char> reported_;  // per sample: its decoding failure is in report_
  size_t undecodable_ = 0;

  std::mutex mutex_;
  std::condition_variable work_ready_, item_done_;
  bool started_ = false, stopping_ = false, mosaic_ = false;
  uint64_t epoch_key_ = 0;
  std::vector<size_t> order_;                     // the rank's share of the shuffle: position -> sample
  std::vector<Item> items_;                       // per position
  std::unique_ptr<HostMemoryPool> staging_;       // stage_batches_in's blocks (before buffers_: outlives them)
  std::map<size_t, std::pmr::vector<uint8_t>> buffers_;  // per batch being prepared: [batch, imgsz, imgsz, 3]
  size_t next_claim_ = 0, next_batch_ = 0;
  int in_flight_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace lab::train
