// NumPy .npz archives (a zip of .npy arrays), read without Python: the timing profiles of SPEC 8.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dyn/base/error.h"

namespace dyn::engine {

/// One array of an .npz: its shape (row-major, C order after reading) and its values as doubles.
struct NpyArray {
  std::vector<size_t> shape;  ///< empty for a 0-d array (one value)
  std::vector<double> values;
  size_t size() const { return values.size(); }
};

/// Reads every array of the .npz at `path` (member "NAME.npy" -> key "NAME"). Stored (numpy.savez)
/// and deflated (numpy.savez_compressed) members, npy format 1.0-3.0, little- or big-endian
/// float64/float32/int64/int32/int16/int8/uint64/uint32/uint16/uint8/bool, C or Fortran order.
/// Errors (kExitBadData, each naming `path` and the member): not a zip, a member that is not a
/// .npy array, an unsupported dtype (object arrays, strings), a truncated array.
Expected<std::map<std::string, NpyArray>> read_npz(const std::string& path);

}  // namespace dyn::engine
