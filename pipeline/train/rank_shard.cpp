// RankShard's positions (rank_shard.hpp).
#include "pipeline/train/rank_shard.hpp"

#include <string>

#include "nvrtc_runtime/errors.hpp"

namespace lab::train {

size_t shard_images(size_t images, int ranks) {
  return (images + size_t(ranks) - 1) / size_t(ranks);
}

std::vector<size_t> shard_positions(size_t images, RankShard shard) {
  if (shard.ranks < 1 || shard.rank < 0 || shard.rank >= shard.ranks)
    throw UsageError("rank " + std::to_string(shard.rank) + " of " + std::to_string(shard.ranks) +
                     ": not a rank of the run");
  std::vector<size_t> positions(shard_images(images, shard.ranks));
  for (size_t k = 0; k < positions.size(); ++k) positions[k] = size_t(shard.rank) + k * size_t(shard.ranks);
  return positions;
}

}  // namespace lab::train
