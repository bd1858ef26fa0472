// A program of the installed package's onnx component: imports one of ONNX's test models, runs it
// on its test inputs and compares with its expected outputs.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <kiln/onnx.hpp>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::filesystem::path dir = argv[1];
  kiln::executable exe = kiln::onnx::compile(dir / "model.onnx");
  kiln::onnx::tensor_data x = kiln::onnx::read_tensor(dir / "test_data_set_0" / "input_0.pb");
  kiln::onnx::tensor_data want = kiln::onnx::read_tensor(dir / "test_data_set_0" / "output_0.pb");
  std::vector<unsigned char> got(want.bytes.size());
  exe.run({kiln::tensor_ref(static_cast<const void*>(x.bytes.data()), x.type, x.dims)},
          {kiln::tensor_ref(static_cast<void*>(got.data()), want.type, want.dims)});
  if (got != want.bytes) {
    std::printf("onnx consumer: the result differs from ONNX's\n");
    return 1;
  }
  std::printf("onnx consumer: %zu bytes match\n", got.size());
}
