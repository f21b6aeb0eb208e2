// Chrome-trace and SVG rendering of a SimResult. Text is built by appending to one string (the
// 70B timeline has ~10^6 entries), numbers through std::to_chars so output does not depend on
// the locale; names that come from user files are JSON- or XML-escaped.
#include "sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

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

std::string chrome_trace_json(const Plan& plan, const SimResult& result) {
  const auto rows = device_rows(plan);
  std::int64_t max_dev = 0;
  for (const auto& r : rows) max_dev = std::max(max_dev, r.device);
  const std::int64_t stride = max_dev + 1;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (std::size_t p = 0; p < plan.pipelines.size(); ++p) {
    const auto& pipe = plan.pipelines[p];
    begin_event();
    out += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
    append_int(out, static_cast<std::int64_t>(p));
    out +=
        ",\"args\":{\"name\":" +
        json_str("pipeline " + std::to_string(p) + " (batch " + std::to_string(pipe.local_batch) +
                 ", micro-batch " + std::to_string(pipe.micro_batch_size) + ")") +
        "}}";
  }
  static const char* kLaneNames[] = {"", " send", " recv", " reduce"};
  for (const auto& r : rows) {
    for (int lane = 0; lane < 4; ++lane) {
      const std::int64_t tid = r.device + lane * stride;
      begin_event();
      out += "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":";
      append_int(out, r.pipeline);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"args\":{\"name\":" +
             json_str("device " + std::to_string(r.device) + kLaneNames[lane] + " (stage " +
                      std::to_string(r.stage) + ", " + r.type + ")") +
             "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":";
      append_int(out, r.pipeline);
      out += ",\"tid\":";
      append_int(out, tid);
      out += ",\"args\":{\"sort_index\":";
      append_int(out, r.device * 4 + lane);
      out += "}}";
    }
  }
  for (const auto& e : result.timeline.entries) {
    begin_event();
    out += "{\"name\":\"" + entry_name(e) + "\",\"cat\":\"";
    out += action_kind_name(e.kind);
    out += "\",\"ph\":\"X\",\"pid\":";
    append_int(out, e.pipeline);
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
  for (const auto& st : result.stages) {
    const std::string name = json_str("memory stage " + std::to_string(st.stage) + " (GB)");
    for (const auto& m : st.memory) {
      begin_event();
      out += "{\"name\":" + name + ",\"ph\":\"C\",\"pid\":";
      append_int(out, st.pipeline);
      out += ",\"ts\":";
      append_num(out, static_cast<double>(m.time) / 1e3);
      out += ",\"args\":{\"GB\":";
      append_num(out, m.bytes / 1e9, 4);
      out += "}}";
    }
  }
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

std::string timeline_svg(const Plan& plan, const SimResult& result, const SvgOptions& options) {
  const auto rows = device_rows(plan);
  const double label_w = 190, top = 44, gap = 8, right = 20;
  const double row_h = options.row_px;
  const double plot_w = std::max(100.0, options.width_px - label_w - right);
  const double span_ms = std::max(result.iteration_ms, 1e-6);
  const double px_per_ms = plot_w / span_ms;
  // Row y positions, with a gap between pipelines.
  std::map<std::int64_t, double> row_y;
  double y = top;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].pipeline != rows[i - 1].pipeline) y += gap;
    row_y[rows[i].device] = y;
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
  std::string title = options.title;
  if (title.empty()) {
    std::string t;
    append_num(t, result.iteration_ms, 3);
    title = "simulated iteration: " + t + " ms";
  }
  out += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + xml_escape(title) +
         "</text>\n";
  // Row backgrounds and labels: the empty background between bars is the bubble.
  for (const auto& r : rows) {
    const double ry = row_y[r.device];
    out += "<rect x=\"";
    append_num(out, label_w, 1);
    out += "\" y=\"";
    append_num(out, ry + 1, 1);
    out += "\" width=\"";
    append_num(out, plot_w, 1);
    out += "\" height=\"";
    append_num(out, row_h - 2, 1);
    out += "\" fill=\"#f3f3f3\"/>\n<text x=\"8\" y=\"";
    append_num(out, ry + row_h * 0.7, 1);
    out += "\">" +
           xml_escape("p" + std::to_string(r.pipeline) + " s" + std::to_string(r.stage) + " dev " +
                      std::to_string(r.device) + " " + r.type) +
           "</text>\n";
  }
  // Bars. Compute occupies the middle of the row; sends a strip above; collectives below.
  for (const auto& e : result.timeline.entries) {
    const int lane = lane_of(e.kind);
    if (lane == 2) continue;  // a receive is the same interval as its send, drawn on the sender
    const double ry = row_y[e.device];
    double by = ry + row_h * 0.25, bh = row_h * 0.5;
    if (lane == 1) {
      by = ry + 1;
      bh = row_h * 0.2;
    }
    if (lane == 3) {
      by = ry + row_h * 0.77;
      bh = row_h * 0.2;
    }
    const double x = label_w + ns_to_ms(e.start) * px_per_ms;
    const double w = std::max(0.5, ns_to_ms(e.end - e.start) * px_per_ms);
    out += "<rect x=\"";
    append_num(out, x, 2);
    out += "\" y=\"";
    append_num(out, by, 1);
    out += "\" width=\"";
    append_num(out, w, 2);
    out += "\" height=\"";
    append_num(out, bh, 1);
    out += "\" fill=\"";
    out += colour_of(e.kind);
    out += "\"";
    if (lane == 0) out += " stroke=\"white\" stroke-width=\"0.5\"";
    out += "><title>" + entry_name(e) + " ";
    append_num(out, ns_to_ms(e.start), 3);
    out += "-";
    append_num(out, ns_to_ms(e.end), 3);
    out += " ms</title></rect>\n";
    if (lane == 0 && e.microbatch >= 0 && w >= 14) {
      out += "<text x=\"";
      append_num(out, x + w / 2, 2);
      out += "\" y=\"";
      append_num(out, by + bh * 0.78, 1);
      out += "\" fill=\"white\" font-size=\"9\" text-anchor=\"middle\">";
      append_int(out, e.microbatch);
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
  // Legend.
  struct Item {
    ActionKind kind;
    const char* label;
  };
  const Item items[] = {{ActionKind::Forward, "forward"},
                        {ActionKind::Backward, "backward"},
                        {ActionKind::OptimizerStep, "optimizer step"},
                        {ActionKind::SendActivation, "send activation"},
                        {ActionKind::SendGradient, "send gradient"},
                        {ActionKind::ReduceGradients, "gradient all-reduce"}};
  double lx = 10;
  for (const auto& it : items) {
    out += "<rect x=\"";
    append_num(out, lx, 1);
    out += "\" y=\"";
    append_num(out, legend_y, 1);
    out += "\" width=\"12\" height=\"12\" fill=\"";
    out += colour_of(it.kind);
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

}  // namespace eth
