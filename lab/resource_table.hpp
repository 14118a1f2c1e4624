// Resource reports (harness/resources.hpp) as a table (`lab source --resources`, `lab demo`) or JSON.
#pragma once
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/resources.hpp"

namespace lab {

void print_resources(std::ostream& os, const std::vector<ResourceReport>& reports);
nlohmann::json resources_json(const std::vector<ResourceReport>& reports);

}  // namespace lab
