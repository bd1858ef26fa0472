// relu(x * y + z) through kiln's run-time door; false when spirv-val rejects an emitted kernel.
#pragma once
#include <vector>

#include <kiln/kiln.hpp>

bool relu_fma_graph(const std::vector<float>& x, const std::vector<float>& y,
                    const std::vector<float>& z, std::vector<float>& out, const kiln::device& d);
