// The MTP head (engine/model/mtp_head.cpp) on the CPU backend against tools/mtp.py's reference
// (tests/support/mtp_reference.h: teacher-forced draft logits and a greedy draft chain), and its load errors.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/mtp_head.h"
#include "model/qwen35_model.h"
#include "model/weight_provider.h"
#include "support/mtp_reference.h"
#include "support/tolerances.h"

namespace voltserve {
namespace {

namespace fs = std::filesystem;

fs::path fixture_dir(const std::string& name) {
  return fs::path(VOLTSERVE_SOURCE_DIR) / "tests" / "fixtures" / "models" / name;
}

}  // namespace

TEST_CASE("MTP head: draft logits and the greedy draft chain equal the PyTorch reference", "[golden]") {
  const std::string name = GENERATE("tiny-mtp", "tiny-mtp-copy");
  INFO("fixture " << name);
  auto backend = make_cpu_backend({2, GdnMode::kSequential});
  const testing::MtpReferenceDiff d = testing::check_mtp_against_reference(fixture_dir(name), *backend);
  INFO("teacher-forced draft logits: max |engine - reference| " << d.teacher_forced_worst);
  CHECK(d.teacher_forced_worst <= tol::kCpuVsTransformersLogitsAbs);
  INFO("draft chain logits: max |engine - reference| " << d.chain_worst);
  CHECK(d.chain_worst <= tol::kCpuVsTransformersLogitsAbs);
  CHECK(d.drafts_equal);
  CHECK(d.device_chain_equal);
}

TEST_CASE("MTP head: a model without mtp tensors or without mtp layers is refused with a message", "[golden]") {
  auto backend = make_cpu_backend({1, GdnMode::kAuto});
  auto model = Qwen35Model::load(fixture_dir("tiny-tied"), *backend);
  REQUIRE(model.is_ok());
  auto ckpt = Checkpoint::open(fixture_dir("tiny-tied"));
  REQUIRE(ckpt.is_ok());
  CHECK_FALSE(checkpoint_has_mtp(*ckpt));
  CheckpointWeights source(*ckpt, (*model)->config());
  auto head = MtpHead::load(source, (*model)->config(), *backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  REQUIRE_FALSE(head.is_ok());
  CHECK(head.status().message().find("mtp_num_hidden_layers") != std::string::npos);
  ModelConfig with_layers = (*model)->config();
  with_layers.mtp_num_hidden_layers = 1;
  auto missing = MtpHead::load(source, with_layers, *backend, (*model)->embedding(), (*model)->output(),
                            (*model)->final_norm());
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().message().find("mtp.fc") != std::string::npos);
}

}  // namespace voltserve
