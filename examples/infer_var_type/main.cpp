// infer_var_type: how a program decides, before it runs, which variables hold dense
// tensors (LoDTensor) and which hold sparse rows (SelectedRows); then the program run on
// small data, the kernels writing exactly those kinds.
//
// One embedding table `emb` is looked up twice (a query and a title field, as in a
// two-tower model), so its gradient has two parts that the backward pass adds with `sum`.
// The forward and backward operators are written out here as a framework's backward pass
// would append them; the gradients flowing in (query_emb@GRAD, title_emb@GRAD) are fed as
// data. When an operator is appended, its InferVarType sets the kinds of its outputs:
//
//   lookup_table_grad   W@GRAD is SelectedRows when is_sparse is true, else LoDTensor
//   sum                 LoDTensor if any input is a LoDTensor, else SelectedRows
//   lookup_table        (no InferVarType of its own) the default: LoDTensor
//
// so the program below has a sparse + sparse sum (SelectedRows: the rows concatenated) and a
// sparse + dense one (LoDTensor: the rows added into the dense matrix). The program prints
// its text form, a table of variable -> kind, and the gradients after the run; it exits with
// 1 when an inferred kind is not the one expected here, or a variable holds another kind
// after the run, or the two sums do not describe the same matrix.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fluidk/executor.hpp>
#include <fluidk/fluidk.hpp>
#include <fluidk/program.hpp>
#include <iomanip>
#include <iostream>
#include <map>
#include <ops/ops.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace fluidk;

constexpr std::int64_t table_rows = 10, width = 3;

Tensor ids_tensor(const std::vector<std::int64_t>& ids) {
  Tensor t({std::int64_t(ids.size()), 1}, data_type::int64);
  std::copy(ids.begin(), ids.end(), t.data<std::int64_t>());
  return t;
}

// One gradient row per id, row i filled with first + i (easy to follow in the output).
Tensor gradient_rows(std::size_t rows, float first) {
  Tensor t({std::int64_t(rows), width}, data_type::float32);
  for (std::int64_t i = 0; i < t.dims()[0]; ++i)
    std::fill_n(t.data<float>() + i * width, width, first + float(i));
  return t;
}

std::string to_string(const std::vector<std::int64_t>& ids) {
  std::string out;
  for (const std::int64_t id : ids) out += (out.empty() ? "{" : ", ") + std::to_string(id);
  return out + "}";
}

void print_row(std::int64_t row, const float* values) {
  std::cout << "    row " << std::setw(2) << row << ':';
  for (std::int64_t j = 0; j < width; ++j) std::cout << std::setw(6) << values[j];
  std::cout << '\n';
}

// A gradient as it is held: a SelectedRows' row indices (repeats add up) with one value row
// each; a dense gradient's non-zero rows.
void print_gradient(const Variable& v) {
  if (v.is<SelectedRows>()) {
    const SelectedRows& s = v.get<SelectedRows>();
    std::cout << "  " << v.name() << ": SelectedRows, height " << s.height() << ", rows "
              << to_string(s.rows()) << '\n';
    for (std::size_t i = 0; i < s.rows().size(); ++i)
      print_row(s.rows()[i], s.value().data<float>() + std::int64_t(i) * width);
  } else {
    const LoDTensor& t = v.get<LoDTensor>();
    std::cout << "  " << v.name() << ": LoDTensor " << t.dims() << ", non-zero rows:\n";
    for (std::int64_t r = 0; r < t.dims()[0]; ++r) {
      const float* row = t.data<float>() + r * width;
      if (std::any_of(row, row + width, [](float x) { return x != 0; })) print_row(r, row);
    }
  }
}

// A SelectedRows as the dense matrix it stands for.
std::vector<float> densify(const SelectedRows& s) {
  std::vector<float> dense(std::size_t(s.height() * width), 0.f);
  for (std::size_t i = 0; i < s.rows().size(); ++i)
    for (std::int64_t j = 0; j < width; ++j)
      dense[std::size_t(s.rows()[i] * width + j)] += s.value().data<float>()[std::int64_t(i) * width + j];
  return dense;
}

}  // namespace

int main() {
  ops::register_all();  // append_op validates against the registry and runs each InferVarType

  // --- The program ----------------------------------------------------------------------------
  ProgramDesc program;
  BlockDesc& block = program.global_block();
  block.var("emb") = VarDesc{"emb", var_kind::lod_tensor, data_type::float32, {table_rows, width}, true};
  for (const std::string field : {"query", "title"}) {
    block.var(field) = VarDesc{field, var_kind::lod_tensor, data_type::int64, {-1, 1}};
    block.var(field + "_emb@GRAD") =
        VarDesc{field + "_emb@GRAD", var_kind::lod_tensor, data_type::float32, {-1, width}};
    block.append_op(OpDesc("lookup_table", {{"W", {"emb"}}, {"Ids", {field}}}, {{"Out", {field + "_emb"}}}));
  }
  // The table's gradient from one lookup: sparse (the rows looked up) or dense (the table).
  auto table_grad = [&](const std::string& field, const std::string& out, bool is_sparse) {
    block.append_op(OpDesc("lookup_table_grad",
                           {{"W", {"emb"}}, {"Ids", {field}}, {"Out@GRAD", {field + "_emb@GRAD"}}},
                           {{"W@GRAD", {out}}}, {{"is_sparse", is_sparse}}));
  };
  table_grad("query", "emb@GRAD@query", true);
  table_grad("title", "emb@GRAD@title", true);
  // sparse + sparse: the gradient accumulation of the two parts.
  block.append_op(OpDesc("sum", {{"X", {"emb@GRAD@query", "emb@GRAD@title"}}}, {{"Out", {"emb@GRAD"}}}));
  // The title's part once more, dense this time, and sparse + dense.
  table_grad("title", "emb@GRAD@title_dense", false);
  block.append_op(
      OpDesc("sum", {{"X", {"emb@GRAD@query", "emb@GRAD@title_dense"}}}, {{"Out", {"emb@GRAD@mixed"}}}));

  std::cout << to_text(program) << '\n';

  // --- The inferred kinds ---------------------------------------------------------------------
  // What this program expects of each operator output, and the rule that decides it; the
  // other variables are the ones declared above.
  struct expectation {
    var_kind kind;
    const char* rule;
  };
  const std::map<std::string_view, expectation> expected{
      {"query_emb", {var_kind::lod_tensor, "lookup_table: the default rule"}},
      {"title_emb", {var_kind::lod_tensor, "lookup_table: the default rule"}},
      {"emb@GRAD@query", {var_kind::selected_rows, "lookup_table_grad, is_sparse true"}},
      {"emb@GRAD@title", {var_kind::selected_rows, "lookup_table_grad, is_sparse true"}},
      {"emb@GRAD", {var_kind::selected_rows, "sum: SelectedRows + SelectedRows"}},
      {"emb@GRAD@title_dense", {var_kind::lod_tensor, "lookup_table_grad, is_sparse false"}},
      {"emb@GRAD@mixed", {var_kind::lod_tensor, "sum: SelectedRows + LoDTensor"}},
  };
  bool ok = true;
  std::cout << std::left << std::setw(22) << "variable" << std::setw(14) << "kind"
            << "decided by\n";
  for (const VarDesc& v : block.vars()) {
    const auto it = expected.find(v.name);
    std::cout << std::setw(22) << v.name << std::setw(14) << name_of(v.kind)
              << (it != expected.end() ? it->second.rule : "declared");
    if (it != expected.end() && v.kind != it->second.kind) {
      std::cout << "  MISMATCH: expected " << name_of(it->second.kind);
      ok = false;
    }
    std::cout << '\n';
  }
  std::cout << std::right << '\n';

  // --- The run --------------------------------------------------------------------------------
  const std::vector<std::int64_t> query_ids{1, 4, 1}, title_ids{4, 7};
  Scope scope;
  Tensor emb({table_rows, width}, data_type::float32);
  for (std::int64_t i = 0; i < emb.numel(); ++i) emb.data<float>()[i] = 0.01f * float(i);
  scope.var("emb").set(LoDTensor(emb));
  scope.var("query").set(LoDTensor(ids_tensor(query_ids)));
  scope.var("title").set(LoDTensor(ids_tensor(title_ids)));
  scope.var("query_emb@GRAD").set(LoDTensor(gradient_rows(query_ids.size(), 1)));   // rows 1, 2, ...
  scope.var("title_emb@GRAD").set(LoDTensor(gradient_rows(title_ids.size(), 10)));  // rows 10, 11, ...
  Executor(cpu_place).run(program.block(0), scope);

  // Every variable of the program holds the kind that was inferred for it.
  for (const VarDesc& v : block.vars())
    if (const var_kind held = scope.get(v.name).kind(); held != v.kind) {
      std::cout << "MISMATCH: " << v.name << " was inferred " << name_of(v.kind) << " but holds "
                << name_of(held) << '\n';
      ok = false;
    }

  std::cout << "gradients after the run (ids: query " << to_string(query_ids) << ", title "
            << to_string(title_ids) << "):\n"
            << std::fixed << std::setprecision(1);
  for (const char* name :
       {"emb@GRAD@query", "emb@GRAD@title", "emb@GRAD", "emb@GRAD@title_dense", "emb@GRAD@mixed"})
    print_gradient(scope.get(name));

  // Both sums are query + title: one as rows, one as a matrix.
  const Variable& sparse_sum = scope.get("emb@GRAD");
  const Variable& mixed = scope.get("emb@GRAD@mixed");
  if (ok && sparse_sum.is<SelectedRows>() && mixed.is<LoDTensor>()) {
    const std::vector<float> a = densify(sparse_sum.get<SelectedRows>());
    const LoDTensor& b = mixed.get<LoDTensor>();
    const bool same =
        std::equal(a.begin(), a.end(), b.data<float>(), b.data<float>() + b.numel(),
                   [](float x, float y) { return std::abs(x - y) <= 1e-6f * std::max(1.f, std::abs(y)); });
    std::cout << "emb@GRAD (rows) and emb@GRAD@mixed (dense) are " << (same ? "the same" : "DIFFERENT")
              << " matrix\n";
    ok = same;
  }
  std::cout << (ok ? "OK\n" : "FAILED\n");
  return ok ? 0 : 1;
}
