// configs/models/*.toml -> ModelSpec (format in docs/plan.md), read through
// sim's TomlTable so every error names file:line and the key, and unknown
// keys are rejected with a suggestion.
#include <fmt/format.h>

#include "tessera/plan/model_spec.h"
#include "tessera/sim/toml_reader.h"

namespace tessera::plan {
namespace {

// Reads a string key that must be one of two words; returns true for `yes`.
StatusOr<bool> Choice(const sim::TomlTable& t, const std::string& key, const std::string& yes, const std::string& no,
                      const std::string& fallback) {
  TESSERA_ASSIGN_OR_RETURN(std::string v, t.String(key, fallback));
  if (v == yes) return true;
  if (v == no) return false;
  return t.Error(key, fmt::format("must be \"{}\" or \"{}\", got \"{}\"", yes, no, v));
}

Status ReadMla(const sim::TomlTable& t, MlaDims* d) {
  TESSERA_ASSIGN_OR_RETURN(d->q_lora_rank, t.Integer("q_lora_rank", 0));
  TESSERA_ASSIGN_OR_RETURN(d->kv_lora_rank, t.Integer("kv_lora_rank"));
  TESSERA_ASSIGN_OR_RETURN(d->qk_nope_head_dim, t.Integer("qk_nope_head_dim"));
  TESSERA_ASSIGN_OR_RETURN(d->qk_rope_head_dim, t.Integer("qk_rope_head_dim", 0));
  TESSERA_ASSIGN_OR_RETURN(d->v_head_dim, t.Integer("v_head_dim"));
  return t.Finish();
}

Status ReadMoe(const sim::TomlTable& t, ModelSpec* m) {
  TESSERA_ASSIGN_OR_RETURN(m->moe.experts, t.Integer("experts"));
  TESSERA_ASSIGN_OR_RETURN(m->moe.top_k, t.Integer("top_k"));
  TESSERA_ASSIGN_OR_RETURN(m->moe.shared_experts, t.Integer("shared_experts", 0));
  TESSERA_ASSIGN_OR_RETURN(m->moe.expert_ffn_hidden, t.Integer("expert_ffn_hidden"));
  TESSERA_ASSIGN_OR_RETURN(int64_t first_dense, t.Integer("first_dense_layers", 0));
  TESSERA_ASSIGN_OR_RETURN(int64_t every, t.Integer("every", 1));
  if (first_dense < 0 || first_dense >= m->layers) {
    return t.Error("first_dense_layers", fmt::format("must be in [0, layers={}), got {}", m->layers, first_dense));
  }
  if (every < 1) return t.Error("every", fmt::format("must be >= 1, got {}", every));
  for (int64_t l = first_dense; l < m->layers; ++l) m->moe_layer[l] = (l - first_dense) % every == 0;
  return t.Finish();
}

StatusOr<ModelSpec> ReadModel(const toml::table& root, const std::string& source) {
  sim::TomlTable t(root, source, "");
  ModelSpec m;
  TESSERA_ASSIGN_OR_RETURN(m.name, t.String("name"));
  TESSERA_ASSIGN_OR_RETURN(m.description, t.String("description", ""));
  TESSERA_ASSIGN_OR_RETURN(m.layers, t.Integer("layers"));
  TESSERA_ASSIGN_OR_RETURN(m.hidden, t.Integer("hidden"));
  TESSERA_ASSIGN_OR_RETURN(m.heads, t.Integer("heads"));
  TESSERA_ASSIGN_OR_RETURN(m.kv_heads, t.Integer("kv_heads", m.heads));
  if (m.heads <= 0) return t.Error("heads", fmt::format("must be positive, got {}", m.heads));
  TESSERA_ASSIGN_OR_RETURN(m.head_dim, t.Integer("head_dim", m.hidden / m.heads));
  TESSERA_ASSIGN_OR_RETURN(m.ffn_hidden, t.Integer("ffn_hidden", 0));
  TESSERA_ASSIGN_OR_RETURN(m.vocab, t.Integer("vocab"));
  TESSERA_ASSIGN_OR_RETURN(m.seq_len, t.Integer("seq_len"));
  TESSERA_ASSIGN_OR_RETURN(m.global_batch, t.Integer("global_batch", 0));
  if (m.global_batch < 0) return t.Error("global_batch", fmt::format("must be >= 0, got {}", m.global_batch));
  TESSERA_ASSIGN_OR_RETURN(bool swiglu, Choice(t, "ffn", "swiglu", "gelu", "gelu"));
  m.ffn = swiglu ? FfnKind::kSwiGlu : FfnKind::kGelu;
  TESSERA_ASSIGN_OR_RETURN(m.layernorm, Choice(t, "norm", "layernorm", "rmsnorm", "layernorm"));
  TESSERA_ASSIGN_OR_RETURN(m.learned_positions, Choice(t, "position", "learned", "rope", "learned"));
  TESSERA_ASSIGN_OR_RETURN(m.tied_embeddings, Choice(t, "embeddings", "tied", "untied", "tied"));
  TESSERA_ASSIGN_OR_RETURN(m.linear_bias, Choice(t, "biases", "linear", "none", "linear"));
  TESSERA_ASSIGN_OR_RETURN(double dropout, t.Number("dropout", 0.0));
  if (dropout < 0 || dropout >= 1) return t.Error("dropout", fmt::format("must be in [0, 1), got {}", dropout));
  m.dropout = dropout > 0;
  if (m.layers <= 0) return t.Error("layers", fmt::format("must be positive, got {}", m.layers));
  m.moe_layer.assign(m.layers, false);
  if (t.Has("mla")) {
    m.attention = AttentionKind::kMla;
    TESSERA_ASSIGN_OR_RETURN(sim::TomlTable mla, t.Table("mla"));
    TESSERA_RETURN_IF_ERROR(ReadMla(mla, &m.mla));
  }
  if (t.Has("moe")) {
    TESSERA_ASSIGN_OR_RETURN(sim::TomlTable moe, t.Table("moe"));
    TESSERA_RETURN_IF_ERROR(ReadMoe(moe, &m));
  }
  TESSERA_RETURN_IF_ERROR(t.Finish());
  Status valid = ValidateModelSpec(m);
  if (!valid.ok()) return valid.WithContext(fmt::format("while loading model spec {}", source));
  return m;
}

}  // namespace

StatusOr<ModelSpec> ParseModelSpec(const std::string& toml_text, const std::string& source) {
  TESSERA_ASSIGN_OR_RETURN(toml::table root, sim::ParseTomlText(toml_text, source));
  return ReadModel(root, source);
}

StatusOr<ModelSpec> LoadModelSpec(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(toml::table root, sim::ParseTomlFile(path));
  return ReadModel(root, path);
}

}  // namespace tessera::plan
