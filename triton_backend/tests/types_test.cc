// Triton's data types as ATen's, each way; BYTES refused by name.

#include "unit.h"

namespace deploybench::unit {

void test_types() {
  for (const auto& name : kTypes) {
    TRITONSERVER_DataType t = triton_of(name);
    EXPECT(std::string(type_name(t)) == name);
    EXPECT(aten_type(t, "t") == aten_type("TYPE_" + name, "t"));
  }
  EXPECT(aten_type("TYPE_INT32", "t") == at::kInt);
  EXPECT(aten_type("TYPE_INT64", "t") == at::kLong);
  EXPECT(aten_type("TYPE_FP16", "t") == at::kHalf);
  EXPECT(aten_type("TYPE_BF16", "t") == at::kBFloat16);
  check_throws([] { aten_type(TRITONSERVER_TYPE_BYTES, "text"); },
               {"'text'", "BYTES", "cannot serve"}, "BYTES");
}

}  // namespace deploybench::unit
