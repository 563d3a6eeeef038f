// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 The mixccl authors
//
// Corpus replay for the normal (gcc) build: runs one fuzz target's LLVMFuzzerTestOneInput over
// every file named on the command line (directories: every file inside, sorted), the way
// libFuzzer would run them, so CTest re-checks the corpus and past crash inputs on every run
// without clang. A target signals a bug by aborting; an empty corpus fails too (nothing would be
// tested). A target that cannot run here (no /dev/shm, ...) returns -1 from LLVMFuzzerInitialize
// and the replay exits 77, which CTest reports as skipped.

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

void collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    fprintf(stderr, "replay: cannot stat %s\n", path.c_str());
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const auto& n : names) collect(path + "/" + n, files);
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr && LLVMFuzzerInitialize(&argc, &argv) != 0) {
    printf("replay: %s cannot run on this machine; skipped\n", argv[0]);
    return 77;
  }
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) collect(argv[i], &files);
  if (files.empty()) {
    fprintf(stderr, "replay: no corpus files found\n");
    return 1;
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // A copy of exactly the file's size, so a target that reads past its input trips ASan (in
    // sanitizer builds) just as under libFuzzer.
    std::vector<uint8_t> exact(bytes);
    LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
  }
  printf("replay: %zu inputs, no crash and no invariant violated\n", files.size());
  return 0;
}
