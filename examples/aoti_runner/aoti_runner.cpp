// A C++ serving runtime in miniature: runs an AOTInductor package (.pt2) whose graph calls tileops
// ops. Linking TileOPs::tileops registers torch.ops.tileops.* at startup, before the package loads.
//
//   aoti_runner model.pt2 inputs.pt outputs.pt
//
// inputs.pt is a list of tensors saved with torch.save; outputs.pt receives the outputs as a tuple.
// Built without the library (TILEOPS_RUNNER_WITHOUT_LIBRARY), it shows what a runtime that forgot
// to load libtileops reports.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <torch/csrc/jit/serialization/pickle.h>

#ifndef TILEOPS_RUNNER_WITHOUT_LIBRARY
#include <tileops/ops.h>
#endif

#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The loader's error names the first operator it could not find; say what to do about it.
std::string explain(const std::string& error) {
  std::smatch m;
  if (std::regex_search(error, m, std::regex(R"(tileops::\w+)")))
    return "the package calls " + m.str() + ", which is not registered in this process: link libtileops "
           "(find_package(TileOPs) and TileOPs::tileops) or dlopen it before loading the package";
  return error;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: " << argv[0] << " model.pt2 inputs.pt outputs.pt\n";
    return 2;
  }
#ifndef TILEOPS_RUNNER_WITHOUT_LIBRARY
  std::cout << "libtileops: " << tileops::op_table().size() << " ops registered\n";
#endif
  try {
    std::vector<at::Tensor> inputs;
    const c10::IValue saved_inputs = torch::jit::pickle_load(read_file(argv[2]));
    for (const c10::IValue& v : saved_inputs.toListRef()) inputs.push_back(v.toTensor());
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    const std::vector<at::Tensor> outputs = loader.run(inputs);
    // A tuple pickles as a plain one, which torch.load(weights_only=True) reads (a tensor list does not).
    const auto saved = c10::ivalue::Tuple::create(std::vector<c10::IValue>(outputs.begin(), outputs.end()));
    const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(saved));
    std::ofstream(argv[3], std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout << "ran " << argv[1] << ": " << inputs.size() << " inputs, " << outputs.size() << " outputs\n";
  } catch (const std::exception& e) {
    std::cerr << "aoti_runner: " << explain(e.what()) << "\n";
    return 1;
  }
  return 0;
}
