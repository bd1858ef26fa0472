#!/usr/bin/python3
"""Writes every C++ block of README.md into one test program: each block is the body of
`readme::<NAME>::run()`, where NAME comes from the `<!-- test: NAME -->` line before the block and
tests/readme/contexts.hpp declares what the block uses but does not declare (its arguments, a
model file). A block without such a line fails the build, so a new block is tested too. #line
directives keep the compiler's messages on the README's lines."""
import re
import sys


def blocks(lines, path):
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```cpp":
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            m = re.fullmatch(r"<!-- test: (\w+) -->", lines[j].strip()) if j >= 0 else None
            if not m:
                sys.exit(f"{path}:{i + 1}: a cpp block without a '<!-- test: NAME -->' line")
            k = i + 1
            while lines[k].strip() != "```":
                k += 1
            yield m.group(1), i + 2, lines[i + 1:k]
            i = k
        i += 1


def main(readme, out):
    lines = open(readme).read().split("\n")
    found = list(blocks(lines, readme))
    includes = sorted({l.split("//")[0].strip() for _, _, body in found for l in body
                       if l.startswith("#include")})
    with open(out, "w") as f:
        f.write("// Generated from README.md by tests/readme/extract_blocks.py.\n")
        f.write("\n".join(includes) + '\n#include "contexts.hpp"\n\n')
        for name, first, body in found:
            f.write(f"void readme::{name}::run() {{\n  using namespace kiln;\n")
            f.write(f'#line {first} "README.md"\n')
            for l in body:
                f.write(("" if l.startswith("#include") else l) + "\n")
            f.write("}\n\n")
        f.write("int main() {\n  int failed = 0;\n")
        for name, first, _ in found:
            f.write(f'  failed += readme::run_block<readme::{name}>("{name}", {first});\n')
        f.write(f'  std::printf("%d README blocks run, %d failed\\n", {len(found)}, failed);\n')
        f.write("  return failed != 0;\n}\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
