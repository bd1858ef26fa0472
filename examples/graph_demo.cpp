// The run-time door, as a framework uses it: a graph known only at run time (here built from a
// tiny op list, as an importer would), compiled once, run by name on the default device and on
// the CPU, checked against a scalar loop.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <kiln/executable.hpp>

int main() {
  using namespace kiln;
  // y = sigmoid(x * scale + shift), shift broadcast along the rows of x[rows, 64].
  graph g;
  auto x = g.input("x", dtype::f32, {dyn, 64});
  auto shift = g.input("shift", dtype::f32, {64});
  auto scale = g.input("scale", dtype::f32, {});
  const std::vector<std::string> ops = {"mul scale", "add shift", "sigmoid"};
  auto v = x;
  for (const auto& op : ops) {
    if (op == "mul scale") v = g.mul(v, scale);
    if (op == "add shift") v = g.add(v, shift);
    if (op == "sigmoid") v = g.sigmoid(v);
  }
  g.output("y", v);
  executable exe = compile(g);
  std::printf("%s: %d dispatch region(s)\n", exe.name().c_str(), exe.dispatch_count());

  const std::int64_t rows = 4096;
  std::vector<float> xs(rows * 64), shifts(64), y(rows * 64), y_cpu(rows * 64);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = std::sin(0.01f * float(i));
  for (std::size_t i = 0; i < shifts.size(); ++i) shifts[i] = 0.1f * float(i) - 3.f;
  float s = 1.5f;
  exe.run({{"x", view(xs.data(), {rows, 64})}, {"shift", shifts}, {"scale", s}},
          {{"y", view(y.data(), {rows, 64})}});
  exe.run({{"x", view(xs.data(), {rows, 64})}, {"shift", shifts}, {"scale", s}},
          {{"y", view(y_cpu.data(), {rows, 64})}}, device::cpu());
  double err = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    double want = 1 / (1 + std::exp(-(double(xs[i]) * s + shifts[i % 64])));
    err = std::max({err, std::fabs(y[i] - want), std::fabs(y_cpu[i] - want)});
  }
  std::printf("default device: %s\n", device::default_device().name().c_str());
  bool ok = err < 1e-6;
  std::printf("max error vs scalar loop: %.3g (%s)\n", err, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
