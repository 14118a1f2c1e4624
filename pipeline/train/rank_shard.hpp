// The data split of data-parallel training, as torch's DistributedSampler makes it: every rank shuffles the
// epoch alike (TrainLoader: from the seed and the epoch), the shuffle is padded to a multiple of the ranks by
// repeating its start, and rank r takes the positions r, r + ranks, r + 2 ranks ... of it. Every rank gets
// the same number of images, so every rank runs the same iterations; one rank (the default) takes them all.
#pragma once
#include <cstddef>
#include <vector>

namespace lab::train {

struct RankShard {
  int rank = 0, ranks = 1;
};

// The images each rank takes from an epoch of `images`: ceil(images / ranks).
size_t shard_images(size_t images, int ranks);

// The positions in the padded shuffle that `shard` takes, in order; position p holds the shuffle's image
// p % images. UsageError when ranks < 1 or rank is not in 0..ranks-1.
std::vector<size_t> shard_positions(size_t images, RankShard shard);

}  // namespace lab::train
