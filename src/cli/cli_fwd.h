// CLI11's classes, declared for the cli/ headers that only name them: <CLI/CLI.hpp> costs about
// 5.5 s of CPU per TU at -O2 even unused (it defines objects in every TU that includes it), so
// only the .cpp files that add or read options include it.
#pragma once

namespace CLI {
class App;
class Option;
}  // namespace CLI
