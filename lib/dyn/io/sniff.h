// What an input file that yielded no usable rows looks like, for an error that names the format
// a tool expected and the one it got (issue 21.8).
#pragma once

#include <string>
#include <vector>

namespace dyn::io {

/// The shape of an input, judged from its first non-blank line (after gzip and a UTF-8 BOM).
enum class InputShape {
  kEmpty,         ///< no non-blank line
  kJsonLines,     ///< the first line is a whole JSON object
  kJsonDocument,  ///< the first line opens a JSON value it does not close (a pretty-printed file)
  kCsv,           ///< the first line has commas and no JSON
  kOther,
};

/// Shape of `path` ("-" is not sniffed: stdin cannot be read twice; kOther) and, in `first_line`,
/// its first non-blank line cut to 80 bytes. Never throws for an unreadable file (kOther).
InputShape sniff_input(const std::string& path, std::string* first_line = nullptr);

/// The sentence a tool adds to its "no usable rows" error: what the first input looks like when
/// that explains the failure ("a.csv looks like CSV (first line 'TIMESTAMP,...'), not JSON
/// Lines"), or "" when it is JSON Lines or cannot be told. `hints` maps a shape to the advice
/// for this tool (e.g. {kCsv, "convert it with dyn-trace convert --from azure-csv"}).
std::string explain_unusable_input(const std::vector<std::string>& paths,
                                   const std::vector<std::pair<InputShape, std::string>>& hints);

}  // namespace dyn::io
