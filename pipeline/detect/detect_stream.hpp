// `lab detect` over many images as a stream: host workers (decode and letterbox, in file order, a bounded
// window ahead of the output, each image straight into a staging slot, or only staged there when the
// network letterboxes on the device (staged_letterbox.hpp); and draw and encode of finished
// images, which they take first), forward workers (one Detector each, e.g. one per GPU with --devices, fed
// batches of consecutive same-shape images, uploaded from the slots) and writer threads (the atomic writes of
// the encoded files, so that no host worker waits on the disk). Staging slots are page-locked memory on cuda,
// enough for three batches per forward worker plus one per host worker, so a batch fills while the one
// before it waits and the one before that is uploaded and run. Results, summary lines and skipped files are reported in file order on the calling
// thread, so the output does not depend on the number of workers.
#pragma once
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pipeline/detect/detection.hpp"
#include "pipeline/detect/detector.hpp"
#include "pipeline/detect/stage_profile.hpp"
#include "pipeline/image/image.hpp"

namespace lab {

struct DetectStreamOptions {
  DetectorOptions detector;  // the letterbox of the pre-processing, done by the host workers
  int batch = 1;             // images per forward (see batching.hpp)
  int forward_workers = 1;   // Detectors, each driven by its own thread
  int host_threads = 1;      // decode + letterbox, and save (the hook)
  int writer_threads = 1;    // write what the saves return
  std::vector<BatchShape> prepare;  // built by every Detector before the stream starts (Detector::prepare)
  StageProfile* profile = nullptr;  // gets decode, letterbox, upload, forward, top-k and write times when set
};

// A file a save leaves to the writer threads, written atomically (pipeline/atomic_file.hpp).
struct FileWrite {
  std::filesystem::path path;
  std::string content;
};

struct DetectStreamHooks {
  // Makes forward worker w's Detector, on that worker's thread (a CUDA backend binds to that thread).
  std::function<std::unique_ptr<Detector>(int worker)> make_detector;
  // Called on the calling thread once every Detector exists, before any image is read (e.g. to create the
  // output folder only when the run can start).
  std::function<void()> started;
  // After each forward, on the forward worker's thread (e.g. --dump of the network's tensors).
  std::function<void(Detector&, const std::vector<std::string>& files)> after_forward;
  // Draws and encodes one annotated image, called concurrently from the host workers; returns the files to
  // write (the image, a label file), which the writer threads write before the image counts as finished.
  std::function<std::vector<FileWrite>(Image&, const ImageDetections&)> save;
  // In file order, on the calling thread: a finished image, or a file that could not be decoded.
  std::function<void(const ImageDetections&)> finished;
  std::function<void(const std::string& file, const std::string& error)> skipped;
  // In file order, on the calling thread, before each image is waited for.
  std::function<void(size_t index, size_t total, const std::string& file)> progress;
};

// Makes the Detectors first and has them build options.prepare (a bad option or a missing device fails
// before anything is read or written), then runs every file through the stages and returns the results in
// file order (skipped files left out). A failure in any stage other than decoding stops the stream and is
// rethrown here, after every thread ended.
std::vector<ImageDetections> run_detect_stream(const std::vector<std::filesystem::path>& files,
                                               const DetectStreamOptions& options,
                                               const DetectStreamHooks& hooks);

}  // namespace lab
