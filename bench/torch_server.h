// bench/train_bench's PyTorch side: the virtualenv it installs PyTorch into (the newest torch from
// PyPI, set up by the bench itself, never by the README's commands), and
// tools/torch_gpt2_step.py --serve as a child process whose steps alternate with ETH's. Bench
// code, header-only: one translation unit includes it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace bench {

inline bool torch_importable(const std::string& python) {
  return std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// `venv`/bin/python with torch: creates the virtualenv with Debian's python3 and pip-installs the
// newest torch from PyPI (the CPU wheel index first, plain PyPI if that index is unreachable)
// when it is missing. Returns the interpreter, or "" with the log's path on stderr.
inline std::string ensure_torch_venv(const std::filesystem::path& venv) {
  const std::string python = (venv / "bin" / "python").string();
  if (torch_importable(python)) return python;
  const std::string log = (venv.parent_path() / "torch-venv-setup.log").string();
  std::fprintf(stderr, "train_bench: setting up %s with the newest PyTorch from PyPI (log %s)...\n",
               venv.string().c_str(), log.c_str());
  const std::string pip = (venv / "bin" / "pip").string();
  const std::string cmd =
      "{ /usr/bin/python3 -m venv " + venv.string() + " && { " + pip +
      " install --upgrade --index-url https://download.pytorch.org/whl/cpu torch numpy || " + pip +
      " install --upgrade torch numpy; }; } >" + log + " 2>&1";
  if (std::system(cmd.c_str()) != 0 || !torch_importable(python)) {
    std::fprintf(stderr, "train_bench: PyTorch setup failed, see %s\n", log.c_str());
    return "";
  }
  return python;
}

// tools/torch_gpt2_step.py --serve as a child process: one PyTorch step per step() call, so
// that ETH's and PyTorch's steps alternate and meet the same load from the machine's other users.
class TorchServer {
 public:
  TorchServer() = default;
  TorchServer(const TorchServer&) = delete;
  TorchServer& operator=(const TorchServer&) = delete;
  ~TorchServer() { finish(); }

  // Starts the script under /bin/sh and waits for its warm-up ("ready"). False on failure, with
  // the script's output in error().
  bool start(const std::string& cmd) {
    // A script that dies must not take the bench with it when we next write to its pipe.
    std::signal(SIGPIPE, SIG_IGN);
    int to_child[2], from_child[2];
    if (::pipe(to_child) != 0 || ::pipe(from_child) != 0) return fail("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) return fail("fork failed");
    if (pid_ == 0) {
      ::dup2(to_child[0], 0);
      ::dup2(from_child[1], 1);
      ::dup2(from_child[1], 2);
      ::close(to_child[0]);
      ::close(to_child[1]);
      ::close(from_child[0]);
      ::close(from_child[1]);
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(to_child[0]);
    ::close(from_child[1]);
    to_ = ::fdopen(to_child[1], "w");
    from_ = ::fdopen(from_child[0], "r");
    for (std::string line; read_line(&line);) {
      if (line == "ready") return true;
      output_ += line + "\n";
    }
    return fail("the script ended before it was ready");
  }

  // Seconds of one PyTorch step in `precision` ("fp32" or "bf16"), or a negative number when the
  // script failed.
  double step(const std::string& precision) {
    if (!to_ || !from_) return -1;
    std::fputs(("step " + precision + "\n").c_str(), to_);
    std::fflush(to_);
    for (std::string line; read_line(&line);) {
      if (line.empty() || line[0] != '{') {
        output_ += line + "\n";
        continue;
      }
      try {
        return nlohmann::json::parse(line).at("step_s").get<double>();
      } catch (const std::exception&) {
        output_ += line + "\n";
        return -1;
      }
    }
    return -1;
  }

  // Ends the script; its summary (version, peak RSS), or {"error", "hint"}.
  nlohmann::json finish() {
    if (pid_ <= 0) return summary_;
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
      to_ = nullptr;
    }
    for (std::string line; read_line(&line);) {
      if (!line.empty() && line[0] == '{') {
        try {
          summary_ = nlohmann::json::parse(line);
        } catch (const std::exception&) {
          output_ += line + "\n";
        }
      } else {
        output_ += line + "\n";
      }
    }
    if (from_) std::fclose(from_);
    from_ = nullptr;
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (!summary_.contains("torch")) summary_ = error_json();
    return summary_;
  }

  nlohmann::json error_json() const {
    return {{"error", output_.empty() ? "no output" : output_.substr(0, 400)},
            {"hint", "the bench's virtualenv: see --torch-venv (set up by --torch)"}};
  }

 private:
  bool read_line(std::string* line) {
    if (!from_) return false;
    line->clear();
    for (int c; (c = std::fgetc(from_)) != EOF;) {
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
    return !line->empty();
  }
  bool fail(const std::string& why) {
    output_ += why + "\n";
    finish();
    return false;
  }

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string output_;
  nlohmann::json summary_;
};

}  // namespace bench
