// The demos' command line (alexconv_demo, alexconv_aoti_demo): a bad argument prints the error
// and the program's usage line to stderr and exits with status 2.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

namespace alexconv_demo {

struct Cli {
  const char* usage_text;

  [[noreturn]] void usage(const std::string& error) const {
    std::cerr << "error: " << error << "\n" << usage_text;
    std::exit(2);
  }

  int64_t parse_int(const std::string& flag, const std::string& text, int64_t min) const {
    try {
      size_t used = 0;
      const long long v = std::stoll(text, &used);
      if (used == text.size() && v >= min) return v;
    } catch (const std::exception&) {
    }
    usage(flag + " needs an integer >= " + std::to_string(min) + ", got '" + text + "'");
  }

  double parse_double(const std::string& flag, const std::string& text) const {
    try {
      size_t used = 0;
      const double v = std::stod(text, &used);
      if (used == text.size() && v >= 0) return v;
    } catch (const std::exception&) {
    }
    usage(flag + " needs a number >= 0, got '" + text + "'");
  }
};

}  // namespace alexconv_demo
