#include "tessera/parallel/checkpoint/checkpoint_convert.h"

#include <string>
#include <system_error>
#include <vector>

#include "tessera/parallel/checkpoint/file_io.h"

namespace tessera::parallel::checkpoint {

SafetensorsMetadata MergedMetadata(const CheckpointIndex& index) {
  SafetensorsMetadata m;
  m["format"] = "pt";
  m["tessera.format"] = std::string(kCheckpointFormat);
  m["tessera.step"] = std::to_string(index.step);
  for (const auto& [key, value] : index.metadata.items()) {
    m["metadata." + key] = value.is_string() ? value.get<std::string>()
                                             : value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return m;
}

StatusOr<MergeReport> MergeToSafetensors(const CheckpointReader& reader, const std::filesystem::path& out,
                                         bool overwrite) {
  const CheckpointIndex& index = reader.index();
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : index.tensors) specs.push_back(TensorSpec{name, t.dtype, t.shape});
  TESSERA_ASSIGN_OR_RETURN(std::string header, EncodeSafetensorsHeader(specs, MergedMetadata(index)));
  std::error_code ec;
  if (!overwrite && std::filesystem::exists(out, ec)) {
    return AlreadyExists("'{}' already exists (pass --force to replace it)", out.string());
  }
  TESSERA_ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(out));
  TESSERA_RETURN_IF_ERROR(writer.Append(header.data(), header.size()));
  for (const TensorSpec& spec : specs) {
    StatusOr<TensorData> data = reader.ReadTensor(spec.name);
    if (!data.ok()) return data.status().WithContext(fmt::format("merging '{}' into '{}'", spec.name, out.string()));
    TESSERA_RETURN_IF_ERROR(writer.Append(data->bytes.data(), data->bytes.size()));
  }
  MergeReport report;
  report.tensors = static_cast<int64_t>(specs.size());
  report.bytes = writer.bytes_written();
  TESSERA_RETURN_IF_ERROR(
      writer.Commit(overwrite ? AtomicFileWriter::Replace::kAllow : AtomicFileWriter::Replace::kForbid));
  return report;
}

}  // namespace tessera::parallel::checkpoint
