#include "tessera/train/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "tessera/train/run_record.h"

namespace tessera::train {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

struct Series {
  std::string label;
  std::string color;
  std::vector<std::pair<double, double>> points;
  bool dots = false;
};

// A line chart with axes, min/max labels, a legend, and vertical markers.
std::string LineChart(const std::string& title, const std::vector<Series>& series, const std::string& y_label,
                      const std::vector<ReportData::Marker>& markers = {}) {
  constexpr double kW = 640, kH = 260, kL = 60, kR = 20, kT = 30, kB = 40;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (x0 > x1) return fmt::format("<p>{}: no data</p>", Escape(title));
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  auto px = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto py = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
  std::string svg = fmt::format("<svg width='{}' height='{}' viewBox='0 0 {} {}' role='img'>", kW, kH, kW, kH);
  svg += fmt::format("<text x='{}' y='18' class='t'>{}</text>", kL, Escape(title));
  svg += fmt::format("<line x1='{0}' y1='{1}' x2='{2}' y2='{1}' class='ax'/><line x1='{0}' y1='{3}' x2='{0}' y2='{1}' "
                     "class='ax'/>",
                     kL, kH - kB, kW - kR, kT);
  svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='end'>{:.4g}</text>", kL - 4, py(y1) + 4, y1);
  svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='end'>{:.4g}</text>", kL - 4, py(y0) + 4, y0);
  svg += fmt::format("<text x='{}' y='{}' class='l'>{:.0f}</text>", kL, kH - kB + 16, x0);
  svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='end'>{:.0f}</text>", kW - kR, kH - kB + 16, x1);
  svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='middle'>step</text>", (kL + kW - kR) / 2,
                     kH - kB + 30);
  svg += fmt::format("<text x='12' y='{}' class='l' transform='rotate(-90 12 {})' text-anchor='middle'>{}</text>",
                     (kT + kH - kB) / 2, (kT + kH - kB) / 2, Escape(y_label));
  for (size_t i = 0; i < markers.size(); ++i) {
    const ReportData::Marker& m = markers[i];
    if (m.step < x0 || m.step > x1) continue;
    const double x = px(m.step);
    svg += fmt::format("<g><title>{}</title><line x1='{:.1f}' y1='{}' x2='{:.1f}' y2='{}' stroke='#b07aa1' "
                       "stroke-dasharray='4 3'/><text x='{:.1f}' y='{}' class='l' fill='#b07aa1'>{}</text></g>",
                       Escape(m.detail), x, kT, x, kH - kB, x + 3, kT + 14 + 12 * static_cast<double>(i % 4),
                       Escape(m.label));
  }
  double legend_x = kW - kR - 150;
  for (const Series& s : series) {
    if (s.dots) {
      for (auto [x, y] : s.points) {
        if (std::isfinite(y)) svg += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'/>", px(x), py(y), s.color);
      }
    } else {
      std::string path;
      for (auto [x, y] : s.points) {
        if (!std::isfinite(y)) continue;
        path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "M" : " L", px(x), py(y));
      }
      svg += fmt::format("<path d='{}' fill='none' stroke='{}' stroke-width='1.5'/>", path, s.color);
    }
    svg += fmt::format("<rect x='{}' y='{}' width='10' height='10' fill='{}'/><text x='{}' y='{}' class='l'>{}</text>",
                       legend_x, kT - 4, s.color, legend_x + 14, kT + 5, Escape(s.label));
    legend_x -= 110;
  }
  return svg + "</svg>";
}

std::string MemoryChart(const nlohmann::json& ranks) {
  if (!ranks.is_array() || ranks.empty()) return "";
  const char* keys[] = {"parameters_bytes", "gradients_bytes", "optimizer_state_bytes", "activations_and_buffers_bytes"};
  const char* labels[] = {"parameters", "gradients", "optimizer state", "activations + buffers"};
  const char* colors[] = {"#4e79a7", "#f28e2b", "#59a14f", "#bab0ac"};
  double max_total = 1;
  for (const auto& r : ranks) {
    double t = 0;
    for (const char* k : keys) t += r.value(k, 0.0);
    max_total = std::max(max_total, t);
  }
  const double row = 22, w = 520, left = 70;
  const double h = 40 + row * ranks.size();
  std::string svg = fmt::format("<svg width='{}' height='{}' role='img'><text x='{}' y='18' class='t'>Peak memory per "
                                "rank by category (MiB)</text>",
                                left + w + 120, h + 20, left);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& r = ranks[i];
    double x = left;
    const double y = 30 + row * i;
    svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='end'>rank {}</text>", left - 6, y + 14,
                       r.value("rank", static_cast<int>(i)));
    double total = 0;
    for (int c = 0; c < 4; ++c) {
      const double v = r.value(keys[c], 0.0);
      total += v;
      const double bw = v / max_total * w;
      svg += fmt::format("<rect x='{:.1f}' y='{}' width='{:.1f}' height='16' fill='{}'><title>{}: {:.2f} MiB</title>"
                         "</rect>",
                         x, y, bw, colors[c], labels[c], v / 1048576.0);
      x += bw;
    }
    svg += fmt::format("<text x='{:.1f}' y='{}' class='l'>{:.1f}</text>", x + 4, y + 13, total / 1048576.0);
  }
  double lx = left;
  for (int c = 0; c < 4; ++c) {
    svg += fmt::format("<rect x='{}' y='{}' width='10' height='10' fill='{}'/><text x='{}' y='{}' class='l'>{}</text>",
                       lx, h + 2, colors[c], lx + 14, h + 11, labels[c]);
    lx += 140;
  }
  return svg + "</svg>";
}

std::string TimelineChart(const std::vector<ReportData::Event>& events) {
  if (events.empty()) return "<p>No step was traced (run with <code>--trace</code>).</p>";
  int ranks = 0;
  double end = 0;
  for (const auto& e : events) ranks = std::max(ranks, e.rank + 1), end = std::max(end, e.start_s + e.duration_s);
  if (end <= 0) end = 1;
  const double row = 26, w = 760, left = 70;
  const double h = 40 + row * ranks;
  std::string svg = fmt::format("<svg width='{}' height='{}' role='img'><text x='{}' y='18' class='t'>One step across "
                                "ranks ({:.1f} ms; blue compute, orange communication)</text>",
                                left + w + 20, h + 10, left, end * 1e3);
  for (int r = 0; r < ranks; ++r) {
    svg += fmt::format("<text x='{}' y='{}' class='l' text-anchor='end'>rank {}</text>", left - 6, 30 + row * r + 14, r);
  }
  for (const auto& e : events) {
    const bool comm = e.category == "comm";
    const double y = 30 + row * e.rank + (comm ? 10 : 0);
    svg += fmt::format("<rect x='{:.2f}' y='{:.1f}' width='{:.2f}' height='{}' fill='{}'><title>{} ({:.2f} ms)</title>"
                       "</rect>",
                       left + e.start_s / end * w, y, std::max(0.5, e.duration_s / end * w), comm ? 8 : 10,
                       comm ? "#f28e2b" : "#4e79a7", Escape(e.name), e.duration_s * 1e3);
  }
  return svg + "</svg>";
}

std::string SummaryTable(const nlohmann::json& summary) {
  std::string rows;
  auto add = [&](const std::string& k, const nlohmann::json& v) {
    if (v.is_object() || v.is_array()) return;
    std::string text = v.is_number_float() ? fmt::format("{:.6g}", v.get<double>()) : v.dump();
    if (v.is_string()) text = v.get<std::string>();
    rows += fmt::format("<tr><th>{}</th><td>{}</td></tr>", Escape(k), Escape(text));
  };
  for (auto it = summary.begin(); it != summary.end(); ++it) add(it.key(), it.value());
  if (summary.contains("parallel")) {
    const auto& p = summary["parallel"];
    for (auto it = p.begin(); it != p.end(); ++it) add("parallel." + it.key(), it.value());
  }
  return "<table>" + rows + "</table>";
}

}  // namespace

std::string RenderReportHtml(const std::string& run_name, const ReportData& data) {
  Series loss{"train loss", "#4e79a7", {}, false}, eval_loss{"eval loss", "#e15759", {}, true};
  Series tps{"tokens/s", "#59a14f", {}, false}, metric{"eval metric", "#e15759", {}, true};
  for (const auto& s : data.steps) {
    loss.points.emplace_back(s.step, s.loss);
    tps.points.emplace_back(s.step, s.step_s > 0 ? s.tokens_per_s : NAN);
  }
  for (const auto& e : data.evals) {
    eval_loss.points.emplace_back(e.step, e.loss);
    metric.points.emplace_back(e.step, e.metric);
  }
  std::string html =
      "<!DOCTYPE html><html><head><meta charset='utf-8'><title>tessera run " + Escape(run_name) +
      "</title><style>body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:20px}h2{font-size:16px;"
      "margin-top:28px}table{border-collapse:collapse;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px;"
      "text-align:left}th{background:#f5f5f5}.t{font-size:13px;font-weight:bold}.l{font-size:11px}.ax{stroke:#888}"
      "</style></head><body>";
  html += "<h1>tessera run '" + Escape(run_name) + "'</h1>";
  html += "<h2>Loss</h2>" + LineChart("loss per step", {loss, eval_loss}, "cross-entropy", data.markers);
  if (!data.markers.empty()) {
    html += "<h2>Fault-tolerance events</h2><table><tr><th>step</th><th>event</th></tr>";
    for (const auto& m : data.markers) html += fmt::format("<tr><td>{:.0f}</td><td>{}</td></tr>", m.step, Escape(m.detail));
    html += "</table>";
  }
  html += "<h2>Throughput</h2>" + LineChart("tokens per second (running mean)", {tps}, "tokens/s");
  if (!metric.points.empty()) html += LineChart("held-out metric", {metric}, "metric");
  if (data.summary.contains("parallel")) {
    html += "<h2>Memory</h2>" + MemoryChart(data.summary["parallel"].value("ranks", nlohmann::json::array()));
  }
  html += "<h2>Timeline</h2>" + TimelineChart(data.timeline);
  html += "<h2>Summary</h2>" + SummaryTable(data.summary);
  html += "</body></html>\n";
  return html;
}

void AddRunHistory(const std::string& run_dir, ReportData* data) {
  const int64_t first = data->steps.empty() ? INT64_MAX : data->steps.front().step;
  std::vector<ReportData::Step> steps;
  std::vector<ReportData::Eval> evals;
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (!r.is_object() || !r.contains("step") || !r["step"].is_number_integer()) continue;
    const int64_t step = r["step"].get<int64_t>();
    if (step >= first) continue;
    if (r.contains("loss") && r["loss"].is_number()) {
      steps.push_back({step, r["loss"].get<double>(), r.value("tokens_per_s", 0.0), r.value("step_s", 0.0)});
    } else if (r.contains("eval_loss") && r["eval_loss"].is_number()) {
      evals.push_back({step, r["eval_loss"].get<double>(), r.value("eval_metric", 0.0)});
    }
  }
  data->steps.insert(data->steps.begin(), steps.begin(), steps.end());
  data->evals.insert(data->evals.begin(), evals.begin(), evals.end());
  std::ifstream events(run_dir + "/events.jsonl");
  for (std::string line; std::getline(events, line);) {
    const nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("event") || !e["event"].is_string()) continue;
    const std::string kind = e["event"].get<std::string>();
    const std::string text = e.dump();
    if (kind == "recovered" || kind == "resumed") {
      const double at = e.value("restored_step", 0.0);
      if (e.contains("last_step_before")) {
        const std::string cause = e.contains("failure") && e["failure"].is_object()
                                      ? e["failure"].value("cause", std::string("failure"))
                                      : std::string("interrupted");
        data->markers.push_back({e.value("last_step_before", at), cause, text});
      }
      data->markers.push_back({at, fmt::format("{} from {} ({} lost)", kind, e.value("source", std::string("?")),
                                               e.value("steps_lost", int64_t{0})),
                               text});
    } else if (kind == "rollback") {
      data->markers.push_back({e.value("step", 0.0), fmt::format("rollback to {}", e.value("to_step", int64_t{0})), text});
    } else if (kind == "step_skipped") {
      data->markers.push_back({e.value("step", 0.0), "skipped: " + e.value("reason", std::string()), text});
    }
  }
}

Status WriteReportHtml(const std::string& path, const std::string& run_name, const ReportData& data) {
  return WriteFileAtomic(path, RenderReportHtml(run_name, data));
}

}  // namespace tessera::train
