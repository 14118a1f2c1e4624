// A restricted pickle virtual machine (protocols 2-5, binary opcodes only). It never imports or calls
// anything: globals must be on an allow-list (torch tensor rebuilders and storage types, collections /
// builtins containers, torch.nn / ultralytics module classes and a few pure-data classes), and REDUCE /
// NEWOBJ / BUILD only record what the pickle asks for. Every malformation is a UsageError
// "<where> offset N: ..." (unknown opcode, truncation, stack underflow, bad memo index, missing STOP,
// limits on object count, stack size and MARK nesting).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pipeline/checkpoint/pickle_value.hpp"

namespace lab {

constexpr size_t kMaxPickleValues = 2'000'000;  // total objects one pickle may create
constexpr size_t kMaxPickleStack = 1'000'000;   // entries on the VM stack
constexpr size_t kMaxPickleMarks = 10'000;      // nested MARKs

class PickleDocument {
 public:
  // `where` prefixes every message, e.g. "model.pt: archive/data.pkl".
  static PickleDocument parse(std::span<const uint8_t> bytes, const std::string& where);

  const PickleValue& root() const { return *root_; }
  size_t value_count() const { return values_.size(); }

 private:
  friend class PickleMachine;
  std::vector<std::unique_ptr<PickleValue>> values_;
  PickleValue* root_ = nullptr;
};

}  // namespace lab
