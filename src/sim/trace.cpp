// Chrome-trace and SVG rendering of a SimResult. Text is built by appending to one string (the
// 70B timeline has ~10^6 entries), numbers through std::to_chars so output does not depend on
// the locale; names that come from user files are JSON- or XML-escaped.
#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "core/json_cursor.h"

namespace eth {

namespace {

void append_num(std::string& out, double v, int precision = 3) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  std::string_view s(buf, static_cast<std::size_t>(r.ptr - buf));
  // Trim trailing zeros of the fraction: "12.500" -> "12.5", "3.000" -> "3".
  if (s.find('.') != std::string_view::npos) {
    while (s.back() == '0') s.remove_suffix(1);
    if (s.back() == '.') s.remove_suffix(1);
  }
  out += s;
}

void append_int(std::string& out, std::int64_t v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, static_cast<std::size_t>(r.ptr - buf));
}

std::string json_str(const std::string& s) { return Json(s).dump(); }

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string entry_name(const TimelineEntry& e) {
  Action a{e.kind, e.stage, e.microbatch, e.block};
  return action_token(a);
}

// Lane of a timeline entry: 0 compute, 1 send, 2 receive, 3 gradient collectives.
int lane_of(ActionKind k) {
  switch (k) {
    case ActionKind::SendActivation:
    case ActionKind::SendGradient:
      return 1;
    case ActionKind::RecvActivation:
    case ActionKind::RecvGradient:
      return 2;
    case ActionKind::ReduceGradients:
      return 3;
    default:
      return 0;
  }
}

struct DeviceRow {
  std::int64_t device = 0, pipeline = 0, stage = 0;
  std::string type;
};

std::vector<DeviceRow> device_rows(const Plan& plan) {
  std::vector<DeviceRow> rows;
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& stages = plan.pipelines[p].stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      for (std::int64_t d : stages[s].devices) {
        rows.push_back(
            {d, static_cast<std::int64_t>(p), static_cast<std::int64_t>(s), stages[s].device_type});
      }
    }
  }
  return rows;
}

}  // namespace

namespace {

std::int64_t lane_stride(const std::vector<DeviceRow>& rows) {
  std::int64_t max_dev = 0;
  for (const auto& r : rows) max_dev = std::max(max_dev, r.device);
  return max_dev + 1;
}

// Process and thread names of every pipeline, pids from `pid_base`, names after `prefix`.
void append_processes(std::string& out, bool& first, const Plan& plan,
                      const std::vector<DeviceRow>& rows, std::int64_t pid_base,
                      const std::string& prefix) {
  const std::int64_t stride = lane_stride(rows);
  auto begin_event = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& pipe = plan.pipelines[p];
    begin_event();
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
    append_int(out, pid_base + static_cast<std::int64_t>(p));
    out += ",\"args\":{\"name\":" +
           json_str(prefix + "pipeline " + std::to_string(p) + " (batch " +
                    std::to_string(pipe.local_batch) + ", micro-batch " +
                    std::to_string(pipe.micro_batch_size) + ")") +
           "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":";
    append_int(out, pid_base + static_cast<std::int64_t>(p));
    out += ",\"args\":{\"sort_index\":";
    append_int(out, pid_base + static_cast<std::int64_t>(p));
    out += "}}";
  }
  static const char* kLaneNames[] = {"", " send", " recv", " reduce"};
  for (const auto& r : rows) {
    for (int lane = 0; lane < 4; ++lane) {
      const std::int64_t tid = r.device + lane * stride;
      begin_event();
      out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":";
      append_int(out, pid_base + r.pipeline);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"args\":{\"name\":" +
             json_str("device " + std::to_string(r.device) + kLaneNames[lane] + " (stage " +
                      std::to_string(r.stage) + ", " + r.type + ")") +
             "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":";
      append_int(out, pid_base + r.pipeline);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"args\":{\"sort_index\":";
      append_int(out, r.device * 4 + lane);
      out += "}}";
    }
  }
}

// One "X" event per timeline entry, in the pipeline's process (pid_base + pipeline).
void append_entries(std::string& out, bool& first, const Timeline& timeline,
                    std::int64_t pid_base, std::int64_t stride) {
  for (const auto& e : timeline.entries) {
    if (!first) out += ",\n";
    first = false;
    out += "{\"name\":\"" + entry_name(e) + "\",\"cat\":\"";
    out += action_kind_name(e.kind);
    out += "\",\"ph\":\"X\",\"pid\":";
    append_int(out, pid_base + e.pipeline);
    out += ",\"tid\":";
    append_int(out, e.device + lane_of(e.kind) * stride);
    out += ",\"ts\":";
    append_num(out, static_cast<double>(e.start) / 1e3);
    out += ",\"dur\":";
    append_num(out, static_cast<double>(e.end - e.start) / 1e3);
    out += ",\"args\":{\"stage\":";
    append_int(out, e.stage);
    if (e.microbatch >= 0) {
      out += ",\"microbatch\":";
      append_int(out, e.microbatch);
    }
    if (e.block >= 0) {
      out += ",\"collective\":";
      append_int(out, e.block);
    }
    out += "}}";
  }
}

// The simulated memory of every stage as "C" counter tracks (GB).
void append_memory(std::string& out, bool& first, const SimResult& result) {
  for (const auto& st : result.stages) {
    const std::string name = json_str("memory stage " + std::to_string(st.stage) + " (GB)");
    for (const auto& m : st.memory) {
      if (!first) out += ",\n";
      first = false;
      out += "{\"name\":" + name + ",\"ph\":\"C\",\"pid\":";
      append_int(out, st.pipeline);
      out += ",\"ts\":";
      append_num(out, static_cast<double>(m.time) / 1e3);
      out += ",\"args\":{\"GB\":";
      append_num(out, m.bytes / 1e9, 4);
      out += "}}";
    }
  }
}

}  // namespace

std::string chrome_trace_json(const Plan& plan, const SimResult& result) {
  const auto rows = device_rows(plan);
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  append_processes(out, first, plan, rows, 0, "");
  append_entries(out, first, result.timeline, 0, lane_stride(rows));
  append_memory(out, first, result);
  out += "\n]}\n";
  return out;
}

std::string comparison_trace_json(const Plan& plan, const SimResult& sim,
                                  const MeasuredStep& measured) {
  const auto rows = device_rows(plan);
  const auto pipes = static_cast<std::int64_t>(plan.pipelines.size());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  append_processes(out, first, plan, rows, 0, "simulated ");
  append_processes(out, first, plan, rows, pipes,
                   "measured (step " + std::to_string(measured.step) + ") ");
  append_entries(out, first, sim.timeline, 0, lane_stride(rows));
  append_entries(out, first, measured.timeline, pipes, lane_stride(rows));
  append_memory(out, first, sim);
  out += "\n]}\n";
  return out;
}

namespace {

// A "nice" axis step (1, 2 or 5 x 10^n) giving about `target` ticks over `span`.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

constexpr const char* kWaitColour = "#76b7b2";  // measured: blocked on a neighbour
constexpr const char* kSyncColour = "#ff9da7";  // measured: sync after the schedule

const char* colour_of(ActionKind k) {
  switch (k) {
    case ActionKind::Forward:
      return "#4e79a7";
    case ActionKind::Backward:
      return "#f28e2b";
    case ActionKind::OptimizerStep:
      return "#59a14f";
    case ActionKind::SendActivation:
      return "#b07aa1";
    case ActionKind::SendGradient:
      return "#9c755f";
    case ActionKind::ReduceGradients:
      return "#e15759";
    default:
      return "#bab0ac";
  }
}

}  // namespace

namespace {

struct SvgRow {
  std::int64_t group = 0;  // rows of one group sit together; a gap separates groups
  std::string label;
};

// Where a bar sits in its row: the compute band, a strip above it, a thin strip across its
// middle (measured waits) or a strip below it.
enum class Band { Compute, Above, Middle, Below };

struct SvgBar {
  std::size_t row = 0;
  Band band = Band::Compute;
  const char* colour = "";
  std::string tip;              // the <title>
  std::int64_t microbatch = -1;  // drawn inside compute bars wide enough
  TimeNs start = 0, end = 0;
};

struct LegendItem {
  const char* colour;
  const char* label;
};

// Draws rows of bars over one time axis [0, span_ms]: labels, grey row backgrounds (the gaps
// are idle time), bars, the axis and a legend.
std::string render_svg(const std::vector<SvgRow>& rows, const std::vector<SvgBar>& bars,
                       double span_ms, const std::string& title,
                       const std::vector<LegendItem>& legend, const SvgOptions& options) {
  const double label_w = 190, top = 44, gap = 8, right = 20;
  const double row_h = options.row_px;
  const double plot_w = std::max(100.0, options.width_px - label_w - right);
  span_ms = std::max(span_ms, 1e-6);
  const double px_per_ms = plot_w / span_ms;
  std::vector<double> row_y(rows.size());
  double y = top;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].group != rows[i - 1].group) y += gap;
    row_y[i] = y;
    y += row_h;
  }
  const double axis_y = y + 6;
  const double legend_y = axis_y + 34;
  const double height = legend_y + 24;

  std::string out;
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"";
  append_num(out, options.width_px, 0);
  out += "\" height=\"";
  append_num(out, height, 0);
  out += "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
  // Row backgrounds and labels: the empty background between bars is the bubble.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out += "<rect x=\"";
    append_num(out, label_w, 1);
    out += "\" y=\"";
    append_num(out, row_y[i] + 1, 1);
    out += "\" width=\"";
    append_num(out, plot_w, 1);
    out += "\" height=\"";
    append_num(out, row_h - 2, 1);
    out += "\" fill=\"#f3f3f3\"/>\n<text x=\"8\" y=\"";
    append_num(out, row_y[i] + row_h * 0.7, 1);
    out += "\">" + xml_escape(rows[i].label) + "</text>\n";
  }
  for (const SvgBar& b : bars) {
    const double ry = row_y[b.row];
    double by = ry + row_h * 0.25, bh = row_h * 0.5;
    if (b.band == Band::Above) by = ry + 1, bh = row_h * 0.2;
    if (b.band == Band::Middle) by = ry + row_h * 0.42, bh = row_h * 0.16;
    if (b.band == Band::Below) by = ry + row_h * 0.77, bh = row_h * 0.2;
    const double x = label_w + ns_to_ms(b.start) * px_per_ms;
    const double w = std::max(0.5, ns_to_ms(b.end - b.start) * px_per_ms);
    out += "<rect x=\"";
    append_num(out, x, 2);
    out += "\" y=\"";
    append_num(out, by, 1);
    out += "\" width=\"";
    append_num(out, w, 2);
    out += "\" height=\"";
    append_num(out, bh, 1);
    out += "\" fill=\"";
    out += b.colour;
    out += "\"";
    if (b.band == Band::Compute) out += " stroke=\"white\" stroke-width=\"0.5\"";
    out += "><title>" + xml_escape(b.tip) + " ";
    append_num(out, ns_to_ms(b.start), 3);
    out += "-";
    append_num(out, ns_to_ms(b.end), 3);
    out += " ms</title></rect>\n";
    if (b.band == Band::Compute && b.microbatch >= 0 && w >= 14) {
      out += "<text x=\"";
      append_num(out, x + w / 2, 2);
      out += "\" y=\"";
      append_num(out, by + bh * 0.78, 1);
      out += "\" fill=\"white\" font-size=\"9\" text-anchor=\"middle\">";
      append_int(out, b.microbatch);
      out += "</text>\n";
    }
  }
  // Time axis.
  out += "<line x1=\"";
  append_num(out, label_w, 1);
  out += "\" y1=\"";
  append_num(out, axis_y, 1);
  out += "\" x2=\"";
  append_num(out, label_w + plot_w, 1);
  out += "\" y2=\"";
  append_num(out, axis_y, 1);
  out += "\" stroke=\"black\"/>\n";
  const double step = nice_step(span_ms, 10);
  for (double t = 0; t <= span_ms + 1e-9; t += step) {
    const double x = label_w + t * px_per_ms;
    out += "<line x1=\"";
    append_num(out, x, 2);
    out += "\" y1=\"";
    append_num(out, axis_y, 1);
    out += "\" x2=\"";
    append_num(out, x, 2);
    out += "\" y2=\"";
    append_num(out, axis_y + 4, 1);
    out += "\" stroke=\"black\"/>\n<text x=\"";
    append_num(out, x, 2);
    out += "\" y=\"";
    append_num(out, axis_y + 16, 1);
    out += "\" text-anchor=\"middle\">";
    append_num(out, t, 3);
    out += "</text>\n";
  }
  out += "<text x=\"";
  append_num(out, label_w + plot_w, 1);
  out += "\" y=\"";
  append_num(out, axis_y + 30, 1);
  out += "\" text-anchor=\"end\">time (ms)</text>\n";
  double lx = 10;
  for (const LegendItem& it : legend) {
    out += "<rect x=\"";
    append_num(out, lx, 1);
    out += "\" y=\"";
    append_num(out, legend_y, 1);
    out += "\" width=\"12\" height=\"12\" fill=\"";
    out += it.colour;
    out += "\"/>\n<text x=\"";
    append_num(out, lx + 16, 1);
    out += "\" y=\"";
    append_num(out, legend_y + 10, 1);
    out += "\">";
    out += it.label;
    out += "</text>\n";
    lx += 30 + 7.0 * static_cast<double>(std::char_traits<char>::length(it.label));
  }
  out += "<text x=\"";
  append_num(out, lx, 1);
  out += "\" y=\"";
  append_num(out, legend_y + 10, 1);
  out += "\" fill=\"#777\">grey gaps: idle (bubbles)</text>\n";
  out += "</svg>\n";
  return out;
}

// The bars of a timeline's entries in `row_of(device)`: compute in the band, sends above,
// collectives below; receives are drawn on the sender (the same interval) unless `waits`, when
// they are the time a measured rank was blocked and go across the middle.
void add_bars(std::vector<SvgBar>& bars, const Timeline& timeline,
              const std::map<std::int64_t, std::size_t>& row_of, bool waits) {
  for (const auto& e : timeline.entries) {
    const int lane = lane_of(e.kind);
    if (lane == 2 && !waits) continue;
    SvgBar b;
    b.row = row_of.at(e.device);
    b.band = lane == 0 ? Band::Compute : lane == 1 ? Band::Above : lane == 2 ? Band::Middle
                                                                             : Band::Below;
    b.colour = lane == 2 ? kWaitColour : colour_of(e.kind);
    b.tip = lane == 2 ? "blocked on " + entry_name(e) : entry_name(e);
    b.microbatch = e.microbatch;
    b.start = e.start;
    b.end = e.end;
    bars.push_back(std::move(b));
  }
}

std::vector<LegendItem> base_legend() {
  return {{colour_of(ActionKind::Forward), "forward"},
          {colour_of(ActionKind::Backward), "backward"},
          {colour_of(ActionKind::OptimizerStep), "optimizer step"},
          {colour_of(ActionKind::SendActivation), "send activation"},
          {colour_of(ActionKind::SendGradient), "send gradient"},
          {colour_of(ActionKind::ReduceGradients), "gradient all-reduce"}};
}

std::string ms_text(double ms) {
  std::string t;
  append_num(t, ms, 3);
  return t + " ms";
}

}  // namespace

std::string timeline_svg(const Plan& plan, const SimResult& result, const SvgOptions& options) {
  std::vector<SvgRow> rows;
  std::map<std::int64_t, std::size_t> row_of;
  for (const auto& r : device_rows(plan)) {
    row_of[r.device] = rows.size();
    rows.push_back({r.pipeline, "p" + std::to_string(r.pipeline) + " s" + std::to_string(r.stage) +
                                    " dev " + std::to_string(r.device) + " " + r.type});
  }
  std::vector<SvgBar> bars;
  add_bars(bars, result.timeline, row_of, false);
  const std::string title = options.title.empty()
                                ? "simulated iteration: " + ms_text(result.iteration_ms)
                                : options.title;
  return render_svg(rows, bars, result.iteration_ms, title, base_legend(), options);
}

std::string comparison_svg(const Plan& plan, const SimResult& sim, const MeasuredStep& measured,
                           const SvgOptions& options) {
  std::vector<SvgRow> rows;
  std::map<std::int64_t, std::size_t> sim_row, measured_row;
  for (const auto& r : device_rows(plan)) {
    const std::string label = "p" + std::to_string(r.pipeline) + " s" +
                              std::to_string(r.stage) + " dev " + std::to_string(r.device) + " ";
    sim_row[r.device] = rows.size();
    rows.push_back({r.device, label + "simulated"});
    measured_row[r.device] = rows.size();
    rows.push_back({r.device, label + "measured"});
  }
  std::vector<SvgBar> bars;
  add_bars(bars, sim.timeline, sim_row, false);
  add_bars(bars, measured.timeline, measured_row, true);
  for (const MeasuredSpan& s : measured.sync) {
    bars.push_back({measured_row.at(s.device), Band::Middle, kSyncColour,
                    "sync (gradient aggregation, loss reduction)", -1, s.start, s.end});
  }
  std::vector<LegendItem> legend = base_legend();
  legend.push_back({kWaitColour, "blocked on a neighbour"});
  legend.push_back({kSyncColour, "sync"});
  const double measured_ms = ns_to_ms(measured.iteration);
  const std::string title =
      options.title.empty() ? "simulated " + ms_text(sim.iteration_ms) + " vs measured " +
                                  ms_text(measured_ms) + " (step " +
                                  std::to_string(measured.step) + ")"
                            : options.title;
  return render_svg(rows, bars, std::max(sim.iteration_ms, measured_ms), title, legend, options);
}

}  // namespace eth
