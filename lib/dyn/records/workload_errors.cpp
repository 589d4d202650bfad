// Errors about workload inputs as a whole (the per-row ones are in workload.cpp).
#include "dyn/io/sniff.h"
#include "dyn/records/workload.h"

namespace dyn::records {

std::string no_workload_rows_message(const std::vector<std::string>& paths) {
  std::vector<std::string> files = paths.empty() ? std::vector<std::string>{"-"} : paths;
  std::string names;
  for (const auto& p : files) names += (names.empty() ? "" : ", ") + (p == "-" ? std::string("<stdin>") : p);
  std::string msg = "no usable workload rows in " + names +
                    ": expected Mooncake JSONL (one JSON object per line with input_length, output_length, "
                    "hash_ids) or Dynamo trace records";
  std::string why = io::explain_unusable_input(
      files,
      {{io::InputShape::kCsv, "for an Azure LLM inference trace run 'dyn-trace convert --from azure-csv FILE' first"},
       {io::InputShape::kJsonDocument,
        "write one object per line (jq -c '.[]' FILE for an array), or for AIPerf's trace formats "
        "use the per-request JSONL"}});
  if (!why.empty()) msg += "; " + why;
  return msg;
}

}  // namespace dyn::records
