// The dataset YAML and the YOLO-format split reader on small generated fixtures: every rule of
// yolo_dataset.hpp (errors, corrupt labels skipped with file:line, backgrounds counted, duplicates removed),
// and the synthetic dataset writer (deterministic for a seed whatever the threads, labels that the reader
// accepts and that match the drawn shapes, nothing left behind on failure).
#include <catch2/catch.hpp>

#include <filesystem>

#include "nvrtc_runtime/errors.hpp"
#include "pipeline/dataset/data_yaml.hpp"
#include "pipeline/dataset/synth_dataset.hpp"
#include "pipeline/dataset/yolo_dataset.hpp"
#include "pipeline/image/image.hpp"
#include "tests/fuzz_support.hpp"
#include "tests/error_message.hpp"
#include "tests/test_helpers.hpp"

using namespace lab;
using namespace lab::dataset;
using lab::test::contains;
using lab::test::error_message;
using lab::test::read_text;
using lab::test::ScratchDir;
using lab::test::write_file;
namespace fs = std::filesystem;

namespace {

// A dataset root with data.yaml naming 3 classes and `val: images/val`.
fs::path make_root(const fs::path& root) {
  fs::create_directories(root / "images" / "val");
  fs::create_directories(root / "labels" / "val");
  write_file(root / "data.yaml", "path: .\ntrain: images/train\nval: images/val\nnames: [a, b, c]\n");
  return root / "data.yaml";
}

// An image file (the reader does not decode images) and, unless `label` is null, its label file.
void add_sample(const fs::path& root, const std::string& stem, const char* label) {
  write_file(root / "images" / "val" / (stem + ".jpg"), "not decoded by the reader");
  if (label) write_file(root / "labels" / "val" / (stem + ".txt"), label);
}

}  // namespace

TEST_CASE("data YAML: names as a list or a mapping, nc, relative paths, split lists", "[dataset]") {
  ScratchDir dir("data-yaml");
  write_file(dir.path / "a.yaml", "path: ds\ntrain: [images/t1, images/t2]\nval: images/v\nnames: [x, y]\n");
  const DataConfig a = read_data_yaml(dir.path / "a.yaml");
  CHECK(a.root == (dir.path / "ds").lexically_normal());
  REQUIRE(a.train.size() == 2);
  CHECK(a.train[1] == dir.path / "ds" / "images" / "t2");
  CHECK(a.val == std::vector<fs::path>{dir.path / "ds" / "images" / "v"});
  CHECK(a.names == std::vector<std::string>{"x", "y"});

  write_file(dir.path / "b.yaml", "val: v\nnc: 3\nnames:\n  2: car\n  0: person\n  1: bike\n");
  const DataConfig b = read_data_yaml(dir.path / "b.yaml");
  CHECK(b.root == dir.path);  // no path: the YAML's folder
  CHECK(b.names == std::vector<std::string>{"person", "bike", "car"});
  CHECK(b.train.empty());
  CHECK(error_message<UsageError>([&] { split_sources(b, "train"); }) ==
        (dir.path / "b.yaml").string() + ": no 'train' split");

  write_file(dir.path / "c.yaml", "val: v\nnc: 2\n");
  CHECK(read_data_yaml(dir.path / "c.yaml").names == std::vector<std::string>{"class0", "class1"});
}

TEST_CASE("data YAML: malformed files are one-line errors naming the file and line", "[dataset]") {
  ScratchDir dir("data-yaml-bad");
  const auto error_for = [&](const std::string& text) {
    write_file(dir.path / "d.yaml", text);
    return error_message<UsageError>([&] { read_data_yaml(dir.path / "d.yaml"); });
  };
  const std::string file = (dir.path / "d.yaml").string();
  CHECK(error_for("val: v\nnames: [a, b\n").rfind(file + ":3: not valid YAML (", 0) == 0);
  CHECK(error_for("val: v\n") == file + ": needs 'names' (or 'nc')");
  CHECK(error_for("val: v\nnc: 3\nnames: [a, b]\n") == file + ":2: 'nc' is 3 but 'names' has 2 classes");
  CHECK(error_for("val: v\nnames:\n  0: a\n  5: b\n") ==
        file + ":4: class id '5' of 'names' must be an integer from 0 to 1");
  CHECK(error_for("val: v\nnames: 7\n") ==
        file + ":2: 'names' must be a list or a mapping of class id to name");
  CHECK(error_for("val: [v, [w]]\nnames: [a]\n") == file + ":1: 'val' must be a non-empty string");
  CHECK(error_for("- a\n- b\n") == file + ": expected a mapping with path, train, val, names");
  CHECK(error_message<UsageError>([&] {
          read_data_yaml(dir.path / "absent.yaml");
        }).rfind((dir.path / "absent.yaml").string() + ": cannot read dataset YAML", 0) == 0);
}

TEST_CASE("label files are found the Ultralytics way", "[dataset]") {
  CHECK(label_path_for("/d/images/val/x.jpg") == fs::path("/d/labels/val/x.txt"));
  CHECK(label_path_for("/d/images/a/images/b.PNG") == fs::path("/d/images/a/labels/b.txt"));  // the last one
  CHECK(label_path_for("/d/pics/x.jpg") == fs::path("/d/pics/x.txt"));
  CHECK(label_path_for("images/val/x.jpg") == fs::path("labels/val/x.txt"));
}

TEST_CASE("a split: good labels, backgrounds, duplicates, and corrupt labels skipped with file:line",
          "[dataset]") {
  ScratchDir dir("split");
  const fs::path yaml = make_root(dir.path);
  add_sample(dir.path, "a_good", "0 0.5 0.5 0.2 0.2\n2 0.1 0.1 0.1 0.1\n");
  add_sample(dir.path, "b_missing", nullptr);
  add_sample(dir.path, "c_empty", "\n");
  add_sample(dir.path, "d_fields", "0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2\n");
  add_sample(dir.path, "e_range", "0 0.5 1.5 0.2 0.2\n");
  add_sample(dir.path, "f_class", "0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2 0.2\n");
  add_sample(dir.path, "g_negative", "-1 0.5 0.5 0.2 0.2\n");
  add_sample(dir.path, "h_duplicate", "1 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n");
  add_sample(dir.path, "i_text", "1 0.5 zero 0.2 0.2\n");
  fs::create_directories(dir.path / "images" / "val" / "nested");
  write_file(dir.path / "images" / "val" / "nested" / "j.png", "x");  // folders are searched recursively
  write_file(dir.path / "images" / "val" / "notes.md", "not an image");

  const Split split = read_split(read_data_yaml(yaml), "val");
  const SplitReport& r = split.report;
  CHECK(r.images == 10);
  CHECK(r.labelled == 2);
  CHECK(r.missing == 2);  // b_missing and nested/j
  CHECK(r.empty == 1);
  CHECK(r.corrupt == 5);
  CHECK(r.duplicates == 1);
  CHECK(r.summary() ==
        "10 images, 2 labelled, 3 background (2 no label file, 1 empty label files), 5 corrupt skipped, "
        "1 duplicate labels removed");
  std::vector<std::string> stems;
  for (const Sample& s : split.samples) stems.push_back(s.image.stem().string());
  CHECK(stems == std::vector<std::string>{"a_good", "b_missing", "c_empty", "h_duplicate", "j"});
  REQUIRE(split.samples[0].labels.size() == 2);
  CHECK(split.samples[0].labels[1].cls == 2);
  CHECK(split.samples[0].labels[1].cx == 0.1);
  CHECK(split.samples[3].labels.size() == 1);

  const fs::path labels = dir.path / "labels" / "val";
  REQUIRE(r.warnings.size() == 6);
  CHECK(r.warnings[0] ==
        (labels / "d_fields.txt").string() +
            ":2: expected 'class cx cy w h' (5 numbers), got '1 0.5 0.5 0.2' (corrupt: image skipped)");
  CHECK(r.warnings[1] == (labels / "e_range.txt").string() +
                             ":1: coordinates must be normalised to [0, 1] (corrupt: image skipped)");
  CHECK(r.warnings[2] ==
        (labels / "f_class.txt").string() +
            ":3: class 3 is beyond the dataset's 3 classes (0 to 2) (corrupt: image skipped)");
  CHECK(r.warnings[3] == (labels / "g_negative.txt").string() +
                             ":1: class '-1' is not an integer >= 0 (corrupt: image skipped)");
  CHECK(r.warnings[4] == (labels / "h_duplicate.txt").string() + ": 1 duplicate label lines removed");
  CHECK(contains(r.warnings[5], "i_text.txt:1: expected 'class cx cy w h'"));
}

TEST_CASE("a split: an image that does not decode moves from its label count to the corrupt ones",
          "[dataset]") {
  ScratchDir dir("split-undecodable");
  const fs::path yaml = make_root(dir.path);
  add_sample(dir.path, "a", "0 0.5 0.5 0.2 0.2\n");
  add_sample(dir.path, "b", nullptr);
  Split split = read_split(read_data_yaml(yaml), "val");
  split.report.note_undecodable(split.samples[0], "a.jpg: cannot read image (not a JPEG)");
  split.report.note_undecodable(split.samples[1], "b.jpg: cannot read image (not a JPEG)");
  CHECK(split.report.summary() ==
        "2 images, 0 labelled, 0 background (0 no label file, 0 empty label files), 2 corrupt skipped");
  CHECK(split.report.warnings.back() == "b.jpg: cannot read image (not a JPEG) (corrupt: image skipped)");
}

TEST_CASE("a split: list files, and missing folders or no images are errors naming the path", "[dataset]") {
  ScratchDir dir("split-sources");
  const fs::path yaml = make_root(dir.path);
  add_sample(dir.path, "a", "1 0.5 0.5 0.2 0.2\n");
  add_sample(dir.path, "b", "2 0.5 0.5 0.2 0.2\n");
  write_file(dir.path / "val.txt",
             "./images/val/b.jpg\n" + (dir.path / "images" / "val" / "a.jpg").string() + "\n");
  write_file(dir.path / "list.yaml", "val: val.txt\nnames: [a, b, c]\n");
  const Split listed = read_split(read_data_yaml(dir.path / "list.yaml"), "val");
  REQUIRE(listed.samples.size() == 2);
  CHECK(listed.samples[0].image.filename() == "a.jpg");
  CHECK(listed.samples[1].labels[0].cls == 2);

  write_file(dir.path / "missing.yaml", "val: images/absent\nnames: [a]\n");
  CHECK(error_message<UsageError>([&] { read_split(read_data_yaml(dir.path / "missing.yaml"), "val"); }) ==
        (dir.path / "images" / "absent").string() + ": no such folder or image list");
  fs::create_directories(dir.path / "images" / "empty");
  write_file(dir.path / "empty.yaml", "val: images/empty\nnames: [a]\n");
  CHECK(error_message<UsageError>([&] { read_split(read_data_yaml(dir.path / "empty.yaml"), "val"); }) ==
        "no images (jpg, jpeg, png, bmp) in " + (dir.path / "images" / "empty").string());
  CHECK(error_message<UsageError>([&] { read_split(read_data_yaml(yaml), "train"); }) ==
        (dir.path / "images" / "train").string() + ": no such folder or image list");
}

TEST_CASE("lab data synth: deterministic for a seed, labels the reader accepts, on the drawn shapes",
          "[dataset]") {
  ScratchDir dir("synth");
  SynthOptions options;
  options.classes = 4, options.train = 3, options.val = 5, options.imgsz = 96, options.seed = 7;
  options.out = dir.path / "one";
  options.threads = 1;
  write_synth_dataset(options);
  options.out = dir.path / "two/";
  options.threads = 3;
  write_synth_dataset(options);
  for (const char* file : {"images/val/000004.jpg", "labels/val/000004.txt", "images/train/000000.jpg"})
    CHECK(read_text(dir.path / "one" / file) == read_text(dir.path / "two" / file));
  options.seed = 8;
  CHECK(synth_image(options, 1, 4).image.rgb != decode_image(dir.path / "one/images/val/000004.jpg").rgb);

  const DataConfig config = read_data_yaml(dir.path / "one" / "data.yaml");
  CHECK(config.names == std::vector<std::string>{"circle", "square", "triangle", "star"});
  CHECK(config.root == fs::absolute(dir.path / "one").lexically_normal());
  const Split val = read_split(config, "val");
  CHECK(val.report.summary() ==
        "5 images, 5 labelled, 0 background (0 no label file, 0 empty label files), 0 corrupt skipped");
  CHECK(read_split(config, "train").samples.size() == 3);

  // Each box is the extent of a shape drawn in one colour: the box's own pixels differ from the background
  // texture only inside it (checked on a square, which fills its box, alone on a plain image).
  options.classes = 2;
  const SynthImage made = synth_image(options, 0, 0);
  for (const loss::YoloLabel& l : made.labels) {
    CHECK(l.cls < 2);
    CHECK(l.cx - l.w / 2 >= 0);
    CHECK(l.cx + l.w / 2 <= 1);
    CHECK(l.cy - l.h / 2 >= 0);
    CHECK(l.cy + l.h / 2 <= 1);
  }
  Image plain(40, 30, 10);
  draw_shape(plain, 1, {5, 6, 20, 10}, {200, 100, 50});
  for (int y = 0; y < 30; ++y)
    for (int x = 0; x < 40; ++x) {
      const bool inside = x >= 5 && x < 25 && y >= 6 && y < 16;
      CHECK(plain.pixel(x, y)[0] == (inside ? 200 : 10));
    }
  Image round(40, 40, 0);
  draw_shape(round, 0, {0, 0, 40, 40}, {255, 255, 255});
  CHECK(round.pixel(20, 20)[1] == 255);  // centre
  CHECK(round.pixel(0, 0)[1] == 0);      // corner: outside the circle
  CHECK(round.pixel(20, 0)[1] > 0);      // the circle touches the top side of its box
}

TEST_CASE("lab data synth: refuses a non-empty folder and leaves nothing on failure", "[dataset]") {
  ScratchDir dir("synth-bad");
  SynthOptions options;
  options.train = 2, options.val = 1, options.imgsz = 64;
  options.out = dir.path / "taken";
  write_file(dir.path / "taken" / "keep.txt", "mine");
  CHECK(error_message<UsageError>([&] { write_synth_dataset(options); }) ==
        (dir.path / "taken").string() +
            ": already exists (the dataset is written only to a new or empty folder)");
  CHECK(read_text(dir.path / "taken" / "keep.txt") == "mine");
  options.out = dir.path / "absent" / "ds";
  CHECK(error_message<UsageError>([&] { write_synth_dataset(options); }) ==
        (dir.path / "absent" / "ds").string() + ": cannot create the dataset (folder '" +
            (dir.path / "absent").string() + "' does not exist)");
  options.out = dir.path / "ds";
  options.classes = 9;
  CHECK(error_message<UsageError>([&] { write_synth_dataset(options); }) == "--classes 9: from 1 to 8 (one shape per class)");
  // Nothing but the first fixture is left: no dataset, no temporary folder.
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) entries += entry.path().filename() != "taken";
  CHECK(entries == 0);
  fs::create_directories(dir.path / "empty");  // an empty folder is replaced by the dataset
  options.classes = 2;
  options.out = dir.path / "empty";
  write_synth_dataset(options);
  CHECK(fs::exists(dir.path / "empty" / "labels" / "train" / "000001.txt"));
}

TEST_CASE("lab data synth: the command writes the dataset, bad options are one line, exit 2",
          "[dataset][cli]") {
  ScratchDir dir("synth-cli");
  const std::string out = (dir.path / "tiny").string();
  const lab::test::LabResult made = lab::test::run_lab("data synth " + lab::test::quoted(out) +
                                                       " --classes 2 --train 2 --val 1 --imgsz 64");
  CHECK(made.exit_code == 0);
  CHECK(contains(made.out, "wrote 2 train + 1 val images (64x64, 2 classes) to " + out + " in "));
  CHECK(fs::exists(dir.path / "tiny" / "images" / "val" / "000000.jpg"));
  const lab::test::LabResult again = lab::test::run_lab("data synth " + lab::test::quoted(out));
  CHECK(again.exit_code == 2);
  CHECK(again.err ==
        "lab: " + out + ": already exists (the dataset is written only to a new or empty folder)\n");
  const lab::test::LabResult classes = lab::test::run_lab("data synth x --classes 0");
  CHECK(classes.exit_code == 2);
  CHECK(contains(classes.err, "--classes"));
  CHECK(!fs::exists("x"));
}

TEST_CASE("mutated data YAMLs and label files are a clean read, a skip or a one-line error",
          "[dataset][fuzz]") {
  namespace fuzz = lab::test::fuzz;
  ScratchDir dir("dataset-fuzz");
  const fs::path yaml = make_root(dir.path);
  const std::string good_yaml = read_text(yaml);
  const std::string good_labels = "0 0.5 0.5 0.2 0.2\n2 0.1 0.9 0.05 0.1\n1 0.3 0.3 0.4 0.4\n";
  // Tokens that parsers trip on, spliced in beside the byte mutations.
  const std::vector<std::string> tokens = {
      "nan", "inf", "-inf",  "1e999", "-0", "0x10", "1.5", "\t", "\r\n", "99999999999999999999",
      ": [", "{",   "&a *a", "- ",    "#",  "\xff"};
  fuzz::Rng rng(20);
  const double rss_before = fuzz::peak_rss_mib();
  fuzz::Outcomes yaml_outcomes, label_outcomes;
  int corrupt_label_files = 0;
  const int cases = fuzz::scaled_count(150);
  for (int i = 0; i < cases; ++i) {
    std::string labels = good_labels, text = good_yaml;
    for (std::string* target : {&labels, &text}) {
      if (fuzz::pick(rng, 0, 2) == 0)
        target->insert(fuzz::pick(rng, 0, target->size() + 1), tokens[fuzz::pick(rng, 0, tokens.size())]);
      else
        fuzz::mutate(*target, 0, target->size(), rng);
    }
    write_file(dir.path / "labels" / "val" / "a.txt", labels);
    write_file(dir.path / "images" / "val" / "a.jpg", "x");
    write_file(yaml, good_yaml);
    fuzz::expect_clean(
        [&] {
          const Split split = read_split(read_data_yaml(yaml), "val");
          CHECK(split.report.labelled + split.report.empty + split.report.missing + split.report.corrupt ==
                split.report.images);
          corrupt_label_files += int(split.report.corrupt);
        },
        (dir.path / "labels").string(), "label file " + std::to_string(i), label_outcomes);
    write_file(yaml, text);
    fuzz::expect_clean([&] { read_data_yaml(yaml); }, yaml.string(), "data YAML " + std::to_string(i),
                       yaml_outcomes);
  }
  INFO("dataset fuzz: " << cases << " label files (" << corrupt_label_files
                        << " splits with a skipped image), " << yaml_outcomes.loaded << " YAMLs read, "
                        << yaml_outcomes.rejected << " rejected with one line; slowest "
                        << std::max(label_outcomes.slowest_s, yaml_outcomes.slowest_s) << " s");
  // Every kind of outcome occurs, so the mutations reach the checks.
  CHECK(label_outcomes.loaded == cases);  // a bad label file skips its image, never fails the split
  CHECK(corrupt_label_files > 0);
  CHECK(corrupt_label_files < cases);
  CHECK(yaml_outcomes.loaded > 0);
  CHECK(yaml_outcomes.rejected > 0);
  CHECK(fuzz::peak_rss_mib() - rss_before < 1024);
}
