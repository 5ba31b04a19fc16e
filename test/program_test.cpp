// Programs: OpDesc, BlockDesc and ProgramDesc; append_op's validation and its all-or-nothing
// effect; InferVarType (default, sum, lookup_table_grad) at run time and at compile time;
// the text form, its round trip and its errors.
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <fluidk/program.hpp>
#include <fluidk/runtime_dispatch.hpp>
#include <fluidk/var_kind_traits.hpp>
#include <limits>
#include <ops/lookup_table_grad.hpp>  // the rules of sum and lookup_table_grad, as the operators declare them
#include <ops/sum.hpp>
#include <optional>
#include <string>
#include <vector>

using namespace fluidk;

namespace {

template <class T>
struct noop_kernel {
  using dtype = T;
  void operator()(execution_context&) const {}
};

struct test_sum {
  static constexpr std::string_view name = "test_sum";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(noop_kernel<float>{}, noop_kernel<double>{}));
  static void infer_var_type(const OpDesc& op, BlockDesc& block) { ops::sum::infer_var_type(op, block); }
};

struct test_lookup_table_grad {
  static constexpr std::string_view name = "test_lookup_table_grad";
  static constexpr std::array<std::string_view, 3> inputs{"W", "Ids", "Out@GRAD"};
  static constexpr std::array<std::string_view, 1> outputs{"W@GRAD"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(noop_kernel<float>{}));
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    ops::lookup_table_grad::infer_var_type(op, block);
  }
};

// No InferVarType of its own: the default rule.
struct test_relu {
  static constexpr std::string_view name = "test_relu";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 2> outputs{"Out", "Mask"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(noop_kernel<float>{}));
};

// An InferVarType that changes an output and declares a variable, then fails.
struct test_failing {
  static constexpr std::string_view name = "test_failing";
  static constexpr std::array<std::string_view, 1> inputs{"X"};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(noop_kernel<float>{}));
  static void infer_var_type(const OpDesc& op, BlockDesc& block) {
    for (const std::string& name : op.output("Out")) block.var_recursive(name).kind = var_kind::selected_rows;
    block.var("scratch").dtype = data_type::int8;
    if (BlockDesc* parent = block.parent_block()) parent->var("parent_scratch");
    block.var_recursive(op.input("X").front()).kind = var_kind::lod_tensor_array;
    throw error("operator '" + op.type() + "': failing on purpose");
  }
};

// Its data type from the attribute "dtype", as Fluid's fill_constant.
struct test_fill {
  static constexpr std::string_view name = "test_fill";
  static constexpr std::array<std::string_view, 0> inputs{};
  static constexpr std::array<std::string_view, 1> outputs{"Out"};
  static constexpr std::string_view data_type_attribute = "dtype";
  static constexpr auto kernels = make_kernels(kernels_on<cpu>(noop_kernel<float>{}));
};

const bool registered = [] {
  register_operator<test_fill>();
  register_operator<test_sum>();
  register_operator<test_lookup_table_grad>();
  register_operator<test_relu>();
  register_operator<test_failing>();
  return true;
}();

VarDesc& declare(BlockDesc& block, const std::string& name, var_kind kind,
                 data_type dtype = data_type::float32) {
  VarDesc& v = block.var(name);
  v.kind = kind;
  v.dtype = dtype;
  return v;
}

// "x3" (appending: `"x" + std::to_string(3)` makes g++ 12 -O3 report a false -Wrestrict).
std::string numbered(const char* prefix, std::size_t i) {
  std::string out(prefix);
  out += std::to_string(i);
  return out;
}

OpDesc sum_of(std::vector<std::string> xs, std::string out = "out") {
  return OpDesc("test_sum").set_input("X", std::move(xs)).set_output("Out", {std::move(out)});
}

// The message of the fluidk::error that `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("VarDesc, OpDesc: accessors and equality", "[program]") {
  REQUIRE(registered);
  // An attribute without a name could not be written as program text, nor read back.
  attribute_map attrs;
  CHECK_THROWS_WITH(attrs.set("", std::int32_t(1)), "fluidk: an attribute needs a name");
  CHECK(attrs.size() == 0);
  const VarDesc v{"x"};
  CHECK(v.kind == var_kind::lod_tensor);
  CHECK(v.dtype == data_type::float32);
  CHECK(v.shape.empty());
  CHECK_FALSE(v.persistable);
  VarDesc w = v;
  CHECK(w == v);
  w.shape = {2, 3};
  CHECK(w != v);

  OpDesc op("test_sum");
  op.set_input("X", {"a", "b"}).set_output("Out", {"c"}).set_attr("scale", 2.0f).set_attr("name", "s");
  CHECK(op.type() == "test_sum");
  CHECK(op.input("X") == std::vector<std::string>{"a", "b"});
  CHECK(op.output("Out") == std::vector<std::string>{"c"});
  CHECK(op.has_input("X"));
  CHECK_FALSE(op.has_output("X"));
  CHECK(op.attr<float>("scale") == 2.0f);
  CHECK(op.attr<std::string>("name") == "s");
  CHECK(op.attr_or<bool>("absent", true));
  op.set_attr("zero", 0);  // an int, not a null string
  CHECK(op.attr<std::int32_t>("zero") == 0);

  CHECK_THROWS_WITH(op.input("Y"), "fluidk: operator 'test_sum' has no input slot 'Y'; it has 'X'");
  CHECK_THROWS_WITH(op.output("X"), "fluidk: operator 'test_sum' has no output slot 'X'; it has 'Out'");
  CHECK_THROWS_WITH(op.attr<bool>("scale"),
                    "fluidk: operator 'test_sum' attribute 'scale' holds float, not bool");
  CHECK_THROWS_WITH(op.attr<bool>("nope"), "fluidk: operator 'test_sum' has no attribute 'nope'");

  OpDesc same("test_sum");
  same.set_attr("name", "s").set_attr("zero", 0).set_attr("scale", 2.0f).set_output("Out", {"c"});
  CHECK_FALSE(same == op);
  same.set_input("X", {"a", "b"});
  CHECK(same == op);  // slots and attributes compare by name, not by the order they were set in
  same.set_input("X", {"b", "a"});
  CHECK_FALSE(same == op);
}

TEST_CASE("attribute_map: kept in name order, replaced in place, copied whole", "[program]") {
  attribute_map attrs;
  const auto names = [](const attribute_map& m) {
    std::vector<std::string> out;
    for (const auto& [name, value] : m) out.push_back(name);
    return out;
  };
  // Set in an order that inserts at the end, at the front and in the middle.
  attrs.set("m", std::string("middle"));
  attrs.set("z", std::vector<std::int64_t>{1, 2, 3});
  attrs.set("a", 1.5f);
  attrs.set("n", std::vector<std::string>{"x", "y"});
  attrs.set("b", block_ref{2});
  CHECK(names(attrs) == std::vector<std::string>{"a", "b", "m", "n", "z"});
  CHECK(attrs.get<std::string>("m") == "middle");
  CHECK(attrs.get<std::vector<std::int64_t>>("z") == std::vector<std::int64_t>{1, 2, 3});
  CHECK(attrs.get<float>("a") == 1.5f);
  CHECK(attrs.get<std::vector<std::string>>("n") == std::vector<std::string>{"x", "y"});
  CHECK(attrs.get<block_ref>("b").index == 2);

  // Setting a name again replaces its value, of another kind too, and keeps the order.
  attrs.set("m", std::vector<float>{0.5f});
  attrs.set("a", std::string("now a string"));
  CHECK(names(attrs) == std::vector<std::string>{"a", "b", "m", "n", "z"});
  CHECK(attrs.get<std::vector<float>>("m") == std::vector<float>{0.5f});
  CHECK(attrs.get<std::string>("a") == "now a string");
  CHECK_THROWS_WITH(attrs.get<float>("a", "op"),
                    "fluidk: operator 'op' attribute 'a' holds string, not float");

  // A copy is whole and independent; assignment replaces all of the target's entries.
  attribute_map copy;
  copy.set("only", true);
  copy = attrs;
  CHECK(names(copy) == names(attrs));
  copy.set("n", std::int64_t{7});
  CHECK(attrs.get<std::vector<std::string>>("n") == std::vector<std::string>{"x", "y"});
  CHECK(copy.get<std::int64_t>("n") == 7);
  CHECK_FALSE(copy.contains("only"));
  const attribute_map& same = copy;
  copy = same;  // assigned to itself: unchanged
  CHECK(names(copy) == std::vector<std::string>{"a", "b", "m", "n", "z"});
  CHECK(copy.get<std::int64_t>("n") == 7);
  attribute_map moved = std::move(copy);
  CHECK(moved.get<std::string>("a") == "now a string");
  CHECK(moved.size() == 5);
}

TEST_CASE("BlockDesc: variables", "[program]") {
  BlockDesc block;
  CHECK(block.find_var("x") == nullptr);
  VarDesc& x = block.var("x");
  x.shape = {4};
  block.var("y");
  CHECK(&block.var("x") == &x);  // var() finds before it creates
  CHECK(block.find_var("x") == &x);
  CHECK(block.get_var("x").shape == std::vector<std::int64_t>{4});
  CHECK(block.var_index("y") == 1u);
  CHECK_FALSE(block.var_index("z").has_value());
  CHECK_THROWS_WITH(block.get_var("z"), "fluidk: block 0 has no variable 'z'");
  CHECK_THROWS_WITH(block.var(""), "fluidk: block 0: a variable needs a name");
  for (int i = 0; i < 1000; ++i) block.var(numbered("v", i));
  CHECK(x.shape == std::vector<std::int64_t>{4});  // references stay valid as the block grows
  REQUIRE(block.vars().size() == 1002);
  CHECK(block.vars()[0].name == "x");
  CHECK(block.vars()[1].name == "y");
  CHECK(block.vars()[1001].name == "v999");
}

TEST_CASE("ProgramDesc: blocks", "[program]") {
  ProgramDesc program;
  REQUIRE(program.num_blocks() == 1);
  CHECK(program.block(0).idx() == 0);
  CHECK_FALSE(program.block(0).parent_idx().has_value());
  CHECK(program.global_block().parent_block() == nullptr);
  BlockDesc& b1 = program.append_block();
  BlockDesc& b2 = program.append_block(1);
  CHECK(b1.idx() == 1);
  CHECK(b1.parent_idx() == 0u);
  CHECK(b2.parent_idx() == 1u);
  CHECK(b2.parent_block() == &b1);
  CHECK(b1.parent_block() == &program.block(0));
  CHECK_THROWS_WITH(program.block(3), "fluidk: the program has 3 blocks; there is no block 3");
  CHECK_THROWS_WITH(program.append_block(7), "fluidk: the program has 3 blocks; there is no block 7");

  // A sub-block sees the variables of its parents.
  program.global_block().var("w").persistable = true;
  CHECK(b2.find_var("w") == nullptr);
  CHECK(b2.find_var_recursive("w") == &program.global_block().get_var("w"));

  // Copies link their blocks to themselves.
  ProgramDesc copy = program;
  CHECK(copy == program);
  CHECK(copy.block(2).parent_block() == &copy.block(1));
  CHECK(copy.block(2).find_var_recursive("w") == &copy.global_block().get_var("w"));
  ProgramDesc moved = std::move(copy);
  CHECK(moved.block(2).parent_block() == &moved.block(1));
  ProgramDesc assigned;
  assigned = moved;
  CHECK(assigned.block(1).parent_block() == &assigned.block(0));
  assigned.global_block().var("w").persistable = false;
  CHECK(moved.global_block().get_var("w").persistable);
  CHECK_FALSE(assigned == moved);

  // A copy of one block belongs to no program: it outlives the original's, and finds only its
  // own variables.
  std::optional<BlockDesc> lone;
  {
    ProgramDesc gone = program;
    gone.block(2).var("local");
    lone.emplace(gone.block(2));
  }
  CHECK(lone->idx() == 2);
  CHECK(lone->parent_block() == nullptr);
  CHECK(lone->find_var_recursive("w") == nullptr);
  CHECK(lone->find_var_recursive("local") != nullptr);
  BlockDesc standalone;
  standalone = *lone;  // a block of no program takes the index and parent index too
  CHECK(standalone == *lone);
  // Assigning a block keeps it in its own program: lookups go through this program's blocks.
  ProgramDesc other = program;
  other.global_block().var("w").dtype = data_type::int64;
  other.block(2) = program.block(2);
  CHECK(other.block(2).parent_block() == &other.block(1));
  CHECK(other.block(2).find_var_recursive("w") == &other.global_block().get_var("w"));
  CHECK(other.block(2).find_var_recursive("w")->dtype == data_type::int64);
}

TEST_CASE("append_op: validation", "[program][append_op]") {
  BlockDesc block;
  declare(block, "a", var_kind::lod_tensor);

  SECTION("unknown operator") {
    const std::string message =
        error_of([&] { block.append_op(OpDesc("no_such_op").set_input("X", {"a"})); });
    CHECK_THAT(message, Catch::StartsWith("fluidk: unknown operator 'no_such_op'; registered: "));
    CHECK_THAT(message, Catch::Contains("test_sum"));
    CHECK_THROWS_AS(block.append_op(OpDesc("no_such_op")), not_registered);
  }
  SECTION("unknown input slot") {
    CHECK_THROWS_WITH(block.append_op(OpDesc("test_sum").set_input("Y", {"a"}).set_output("Out", {"o"})),
                      "fluidk: operator 'test_sum' has no input slot 'Y'; its input slots are 'X'");
  }
  SECTION("unknown output slot") {
    CHECK_THROWS_WITH(
        block.append_op(OpDesc("test_relu").set_input("X", {"a"}).set_output("Y", {"o"})),
        "fluidk: operator 'test_relu' has no output slot 'Y'; its output slots are 'Out', 'Mask'");
  }
  SECTION("a slot the InferVarType needs is missing") {
    CHECK_THROWS_WITH(block.append_op(OpDesc("test_sum").set_output("Out", {"o"})),
                      "fluidk: operator 'test_sum' has no input slot 'X'; it has none");
    CHECK_THROWS_WITH(block.append_op(OpDesc("test_sum").set_input("X", {"a"})),
                      "fluidk: operator 'test_sum' has no output slot 'Out'; it has none");
  }
  SECTION("empty variable name") {
    CHECK_THROWS_WITH(block.append_op(sum_of({"a", ""})),
                      "fluidk: operator 'test_sum' input slot 'X': an empty variable name");
  }
  SECTION("use before declaration") {
    CHECK_THROWS_WITH(
        block.append_op(sum_of({"a", "b"})),
        "fluidk: operator 'test_sum' input slot 'X': variable 'b' is used before it is declared");
    // An output of an earlier operator is declared.
    block.append_op(sum_of({"a"}, "b"));
    CHECK_NOTHROW(block.append_op(sum_of({"a", "b"}, "c")));
  }
  SECTION("attribute of the wrong kind") {
    declare(block, "ids", var_kind::lod_tensor, data_type::int64);
    CHECK_THROWS_WITH(block.append_op(OpDesc("test_lookup_table_grad")
                                          .set_input("W", {"a"})
                                          .set_input("Ids", {"ids"})
                                          .set_output("W@GRAD", {"a@GRAD"})
                                          .set_attr("is_sparse", 1)),
                      "fluidk: operator 'test_lookup_table_grad' attribute 'is_sparse' holds int, not bool");
  }
  SECTION("attributes dispatch reads have fixed kinds") {
    CHECK_THROWS_WITH(block.append_op(sum_of({"a"}).set_attr("op_device", 1)),
                      "fluidk: operator 'test_sum' attribute 'op_device' holds int, not string");
    CHECK_THROWS_WITH(block.append_op(sum_of({"a"}).set_attr("use_cudnn", "yes")),
                      "fluidk: operator 'test_sum' attribute 'use_cudnn' holds string, not bool");
    CHECK_NOTHROW(block.append_op(sum_of({"a"}).set_attr("op_device", "cpu").set_attr("use_onednn", false)));
    // The data-type attribute too, read as dispatch reads it: a kind or a word that dispatch
    // would refuse was accepted here and failed only when the program ran.
    CHECK_THROWS_WITH(block.append_op(OpDesc("test_fill").set_output("Out", {"o"}).set_attr("dtype", 5)),
                      "fluidk: operator 'test_fill' attribute 'dtype' holds int, not string");
    CHECK_THROWS_WITH(
        block.append_op(OpDesc("test_fill").set_output("Out", {"o"}).set_attr("dtype", "flaot")),
        Catch::StartsWith("fluidk: operator 'test_fill' attribute 'dtype': unknown data type 'flaot'"));
  }
  // Every failure above left the block as it was.
  if (block.ops().empty()) {
    CHECK(block.vars().size() == 1 + (block.has_var("ids") ? 1 : 0));
    CHECK_FALSE(block.has_var("o"));
  }
}

TEST_CASE("append_op: a failure leaves the block as it was", "[program][append_op]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  declare(global, "w", var_kind::selected_rows, data_type::float64);
  BlockDesc& block = program.append_block();
  declare(block, "a", var_kind::lod_tensor);
  declare(block, "out", var_kind::lod_tensor, data_type::int32);
  block.append_op(sum_of({"a"}, "s"));
  const ProgramDesc before = program;

  // Changes an existing output, declares new outputs and scratch variables in the block and
  // its parent, changes an input of the parent block, then throws.
  CHECK_THROWS_WITH(
      block.append_op(OpDesc("test_failing").set_input("X", {"w"}).set_output("Out", {"out", "fresh"})),
      "fluidk: operator 'test_failing': failing on purpose");
  CHECK(program == before);
  CHECK_FALSE(block.has_var("fresh"));
  CHECK_FALSE(block.has_var("scratch"));
  CHECK_FALSE(global.has_var("parent_scratch"));
  CHECK(global.get_var("w").kind == var_kind::selected_rows);
  CHECK(block.var_index("fresh") == std::nullopt);
  // The block still works: the names can be declared again.
  block.var("scratch");
  CHECK(block.var_index("scratch") == 3u);

  // Failing InferVarType of a registered rule: sum mixing an array with a tensor.
  declare(block, "arr", var_kind::lod_tensor_array);
  const ProgramDesc before2 = program;
  CHECK_THROWS(block.append_op(sum_of({"arr", "a"}, "new_out")));
  CHECK(program == before2);
}

TEST_CASE("append_op: a variable's kind is fixed once an operator uses it", "[program][append_op]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  declare(global, "a", var_kind::lod_tensor);
  declare(global, "b", var_kind::lod_tensor);
  declare(global, "arr", var_kind::lod_tensor_array);
  global.append_op(sum_of({"a", "b"}, "c"));
  const ProgramDesc before = program;
  // sum over an array makes its output an array: 'a', which the first sum read as a tensor.
  CHECK_THROWS_WITH(
      global.append_op(sum_of({"arr"}, "a")),
      "fluidk: operator 'test_sum' makes variable 'a' a LoDTensorArray, but operator 'test_sum' "
      "before it uses it as a LoDTensor; a variable's kind is fixed once an operator uses it");
  CHECK(program == before);
  // The same from a sub-block, for a variable of its parent that the parent's operator wrote.
  BlockDesc& sub = program.append_block();
  CHECK_THROWS_WITH(sub.append_op(sum_of({"arr"}, "c")),
                    Catch::Contains("makes variable 'c' a LoDTensorArray"));
  CHECK(program.global_block().get_var("c").kind == var_kind::lod_tensor);
  // Nor from a sibling block, for a variable an operator of another sub-block used.
  declare(global, "shared", var_kind::lod_tensor_array);
  program.append_block().append_op(sum_of({"arr", "shared"}, "shared"));
  CHECK_THROWS_WITH(
      program.append_block().append_op(
          OpDesc("test_relu").set_input("X", {"b"}).set_output("Out", {"shared"})),
      Catch::Contains("makes variable 'shared' a LoDTensor, but operator 'test_sum' before it uses it "
                      "as a LoDTensorArray"));
  CHECK(global.get_var("shared").kind == var_kind::lod_tensor_array);
  // A variable no operator used yet may take the kind its first writer gives it, and the text
  // of what was built reads back equal.
  declare(global, "fresh", var_kind::lod_tensor);
  global.append_op(sum_of({"arr"}, "fresh"));
  CHECK(global.get_var("fresh").kind == var_kind::lod_tensor_array);
  CHECK(parse_program(to_text(program)) == program);
}

TEST_CASE("a block cannot declare a name that its operators already found in an enclosing block",
          "[program][append_op]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  declare(global, "x", var_kind::lod_tensor);
  declare(global, "z", var_kind::lod_tensor);
  BlockDesc& sub = program.append_block();
  sub.append_op(sum_of({"x", "z"}, "s"));  // block 0's x
  BlockDesc& inner = program.append_block(1);
  inner.append_op(sum_of({"z"}, "t"));  // block 0's z, from a block inside
  const ProgramDesc before = program;
  // Declared now, x and z would be what those operators name: refused, nothing declared.
  CHECK_THROWS_WITH(sub.var("x"),
                    "fluidk: block 1 cannot declare 'x': operator 'test_sum' appended before uses "
                    "the enclosing block's 'x', which the declaration would hide from it");
  CHECK_THROWS_WITH(sub.var("z"), Catch::Contains("block 1 cannot declare 'z'"));
  CHECK(program == before);
  // A name no operator here or inside used may be declared, and shadows from then on.
  declare(inner, "x", var_kind::lod_tensor_array);
  inner.append_op(sum_of({"x"}, "u"));
  CHECK(inner.get_var("u").kind == var_kind::lod_tensor_array);
  CHECK(parse_program(to_text(program)) == program);
}

TEST_CASE("append_op: declares outputs, appends in order, sees parent blocks", "[program][append_op]") {
  ProgramDesc program;
  declare(program.global_block(), "w", var_kind::selected_rows, data_type::float64);
  BlockDesc& sub = program.append_block();
  declare(sub, "x", var_kind::lod_tensor, data_type::float64);

  OpDesc& first = sub.append_op(sum_of({"w", "x"}, "y"));
  CHECK(first.type() == "test_sum");
  REQUIRE(sub.has_var("y"));  // declared in the block itself
  CHECK_FALSE(program.global_block().has_var("y"));
  CHECK(sub.get_var("y").kind == var_kind::lod_tensor);
  CHECK(sub.get_var("y").dtype == data_type::float64);

  // An output that lives in a parent block is the parent's variable.
  sub.append_op(sum_of({"w"}, "w"));
  CHECK_FALSE(sub.has_var("w"));
  CHECK(program.global_block().get_var("w").kind == var_kind::selected_rows);

  sub.append_op(OpDesc("test_relu").set_input("X", {"y"}).set_output("Out", {"z"}));
  REQUIRE(sub.ops().size() == 3);
  CHECK(sub.ops()[0].input("X") == std::vector<std::string>{"w", "x"});
  CHECK(sub.ops()[2].type() == "test_relu");
  CHECK(&sub.ops()[0] == &first);
  CHECK(sub.vars().size() == 3);  // x, y, z
}

TEST_CASE("InferVarType: the default rule", "[program][infer_var_type]") {
  BlockDesc block;
  declare(block, "x", var_kind::selected_rows, data_type::float16);
  declare(block, "m", var_kind::lod_tensor_array, data_type::int8);
  block.append_op(
      OpDesc("test_relu").set_input("X", {"x"}).set_output("Out", {"y"}).set_output("Mask", {"m"}));
  CHECK(block.get_var("y").kind == var_kind::lod_tensor);
  CHECK(block.get_var("y").dtype == data_type::float32);  // a new variable's type; not changed
  CHECK(block.get_var("m").kind == var_kind::lod_tensor);
  CHECK(block.get_var("m").dtype == data_type::int8);  // unchanged
  CHECK(block.get_var("x").kind == var_kind::selected_rows);

  // An empty output slot is fine.
  block.append_op(OpDesc("test_relu").set_input("X", {"x"}).set_output("Out", {}));
  CHECK(block.ops().size() == 2);
}

TEST_CASE("InferVarType: sum in every combination", "[program][infer_var_type]") {
  using k = var_kind;
  struct combination {
    std::vector<var_kind> inputs;
    var_kind out;
  };
  const combination cases[] = {
      {{k::lod_tensor}, k::lod_tensor},
      {{k::lod_tensor, k::lod_tensor}, k::lod_tensor},
      {{k::lod_tensor, k::selected_rows}, k::lod_tensor},
      {{k::selected_rows, k::lod_tensor}, k::lod_tensor},
      {{k::selected_rows, k::selected_rows, k::lod_tensor}, k::lod_tensor},
      {{k::selected_rows}, k::selected_rows},
      {{k::selected_rows, k::selected_rows}, k::selected_rows},
      {{k::lod_tensor_array}, k::lod_tensor_array},
      {{k::lod_tensor_array, k::lod_tensor_array, k::lod_tensor_array}, k::lod_tensor_array},
  };
  for (const combination& c : cases) {
    BlockDesc block;
    std::vector<std::string> names;
    for (std::size_t i = 0; i < c.inputs.size(); ++i) {
      names.push_back(numbered("x", i));
      declare(block, names.back(), c.inputs[i], i == 0 ? data_type::float64 : data_type::float32);
    }
    declare(block, "out", var_kind::lod_tensor, data_type::int32);
    block.append_op(sum_of(names));
    INFO("inputs: " << names.size() << ", first " << name_of(c.inputs[0]));
    CHECK(block.get_var("out").kind == c.out);
    CHECK(block.get_var("out").dtype == data_type::float64);  // the first input's
  }

  SECTION("an array mixed with another kind is an error naming the operator and the variables") {
    BlockDesc block;
    declare(block, "arr", var_kind::lod_tensor_array);
    declare(block, "t", var_kind::lod_tensor);
    declare(block, "rows", var_kind::selected_rows);
    CHECK_THROWS_WITH(
        block.append_op(sum_of({"arr", "t"})),
        "fluidk: operator 'test_sum' input slot 'X': if any input is a LoDTensorArray, all must be; "
        "'arr' is a LoDTensorArray but 't' is a LoDTensor");
    CHECK_THROWS_WITH(
        block.append_op(sum_of({"rows", "arr"})),
        "fluidk: operator 'test_sum' input slot 'X': if any input is a LoDTensorArray, all must be; "
        "'arr' is a LoDTensorArray but 'rows' is a SelectedRows");
    CHECK(block.ops().empty());
    CHECK_FALSE(block.has_var("out"));
  }
  SECTION("no inputs") {
    BlockDesc block;
    CHECK_THROWS_WITH(block.append_op(sum_of({})),
                      "fluidk: operator 'test_sum' input slot 'X' is empty; sum takes the output's data type "
                      "from the first");
  }
  SECTION("called directly, outside append_op") {
    BlockDesc block;
    declare(block, "a", var_kind::selected_rows, data_type::float16);
    ops::sum::infer_var_type(sum_of({"a"}, "o"), block);
    CHECK(block.get_var("o").kind == var_kind::selected_rows);
    CHECK(block.get_var("o").dtype == data_type::float16);
    CHECK_THROWS_WITH(
        ops::sum::infer_var_type(sum_of({"a", "zz"}, "o"), block),
        "fluidk: operator 'test_sum' input slot 'X': variable 'zz' is used before it is declared");
  }
}

TEST_CASE("InferVarType: lookup_table_grad", "[program][infer_var_type]") {
  BlockDesc block;
  declare(block, "emb", var_kind::lod_tensor, data_type::float64).persistable = true;
  declare(block, "ids", var_kind::lod_tensor, data_type::int64);
  declare(block, "out@GRAD", var_kind::lod_tensor, data_type::float64);
  auto grad = [](const std::string& out) {
    return OpDesc("test_lookup_table_grad")
        .set_input("W", {"emb"})
        .set_input("Ids", {"ids"})
        .set_input("Out@GRAD", {"out@GRAD"})
        .set_output("W@GRAD", {out});
  };
  block.append_op(grad("sparse").set_attr("is_sparse", true));
  block.append_op(grad("dense").set_attr("is_sparse", false));
  block.append_op(grad("absent"));
  CHECK(block.get_var("sparse").kind == var_kind::selected_rows);
  CHECK(block.get_var("dense").kind == var_kind::lod_tensor);
  CHECK(block.get_var("absent").kind == var_kind::lod_tensor);
  for (const char* name : {"sparse", "dense", "absent"})
    CHECK(block.get_var(name).dtype == data_type::float64);

  // The output kind follows the attribute, also for a variable declared with another kind.
  declare(block, "again", var_kind::selected_rows);
  block.append_op(grad("again"));
  CHECK(block.get_var("again").kind == var_kind::lod_tensor);

  CHECK_THROWS_WITH(block.append_op(grad("bad").set_attr("is_sparse", std::string("yes"))),
                    "fluidk: operator 'test_lookup_table_grad' attribute 'is_sparse' holds string, not bool");
  CHECK_THROWS_WITH(
      block.append_op(OpDesc("test_lookup_table_grad").set_input("W", {}).set_output("W@GRAD", {"g"})),
      "fluidk: operator 'test_lookup_table_grad' input slot 'W' is empty; the weight gradient takes "
      "W's data type");
  CHECK_FALSE(block.has_var("bad"));
  CHECK_FALSE(block.has_var("g"));
}

// --- compile time ---------------------------------------------------------------------------

namespace ck {
using T = kinds::lod_tensor;
using R = kinds::selected_rows;
using A = kinds::lod_tensor_array;

static_assert(T::value == var_kind::lod_tensor && R::value == var_kind::selected_rows &&
              A::value == var_kind::lod_tensor_array);
static_assert(VarKindTag<T> && VarKindTag<R> && VarKindTag<A> && !VarKindTag<int> && !VarKindTag<const T>);
static_assert(std::is_same_v<kind_tag<var_kind::lod_tensor>, T>);
static_assert(std::is_same_v<kind_tag<var_kind::selected_rows>, R>);
static_assert(std::is_same_v<kind_tag<var_kind::lod_tensor_array>, A>);

// sum
static_assert(std::is_same_v<sum_output_kind<T>, T>);
static_assert(std::is_same_v<sum_output_kind<T, T>, T>);
static_assert(std::is_same_v<sum_output_kind<T, R>, T>);
static_assert(std::is_same_v<sum_output_kind<R, T>, T>);
static_assert(std::is_same_v<sum_output_kind<R, R, T, R>, T>);
static_assert(std::is_same_v<sum_output_kind<R>, R>);
static_assert(std::is_same_v<sum_output_kind<R, R, R>, R>);
static_assert(std::is_same_v<sum_output_kind<A>, A>);
static_assert(std::is_same_v<sum_output_kind<A, A, A>, A>);
static_assert(sum_output_kind<R, T>::value == var_kind::lod_tensor);
// (sum_output_kind<A, T>: see test/compile_fail/sum_kind_mixed_array.cpp)

// lookup_table_grad
static_assert(std::is_same_v<lookup_table_grad_output_kind<true>, R>);
static_assert(std::is_same_v<lookup_table_grad_output_kind<false>, T>);

// the generic form
static_assert(std::is_same_v<infer_output_kind<rules::sum, R, R>, R>);
static_assert(std::is_same_v<infer_output_kind<rules::sum, R, T>, T>);
static_assert(std::is_same_v<infer_output_kind<rules::lookup_table_grad<true>, T, T, T>, R>);
static_assert(std::is_same_v<infer_output_kind<rules::dense, R, A>, T>);
static_assert(std::is_same_v<default_output_kind<R>, T>);
}  // namespace ck

namespace {
// The runtime sum rule on these kinds, or var_kind::empty when it rejects them.
var_kind runtime_sum(std::initializer_list<var_kind> inputs) {
  BlockDesc block;
  std::vector<std::string> names;
  for (const var_kind k : inputs) declare(block, names.emplace_back(numbered("x", names.size())), k);
  try {
    block.append_op(sum_of(names));
  } catch (const error&) {
    return var_kind::empty;
  }
  return block.get_var("out").kind;
}

template <class... In>
constexpr var_kind static_sum() {
  constexpr bool any_array = (std::is_same_v<In, kinds::lod_tensor_array> || ...);
  constexpr bool all_array = (std::is_same_v<In, kinds::lod_tensor_array> && ...);
  if constexpr (any_array && !all_array)
    return var_kind::empty;  // rejected (instantiating it would be the static_assert)
  else
    return sum_output_kind<In...>::value;
}
}  // namespace

TEST_CASE("InferVarType: the compile-time rules agree with the runtime ones", "[program][infer_var_type]") {
  using T = kinds::lod_tensor;
  using R = kinds::selected_rows;
  using A = kinds::lod_tensor_array;
  const auto t = var_kind::lod_tensor, r = var_kind::selected_rows, a = var_kind::lod_tensor_array;
  CHECK(runtime_sum({t}) == static_sum<T>());
  CHECK(runtime_sum({r}) == static_sum<R>());
  CHECK(runtime_sum({a}) == static_sum<A>());
  CHECK(runtime_sum({t, t}) == static_sum<T, T>());
  CHECK(runtime_sum({t, r}) == static_sum<T, R>());
  CHECK(runtime_sum({t, a}) == static_sum<T, A>());
  CHECK(runtime_sum({r, t}) == static_sum<R, T>());
  CHECK(runtime_sum({r, r}) == static_sum<R, R>());
  CHECK(runtime_sum({r, a}) == static_sum<R, A>());
  CHECK(runtime_sum({a, t}) == static_sum<A, T>());
  CHECK(runtime_sum({a, r}) == static_sum<A, R>());
  CHECK(runtime_sum({a, a}) == static_sum<A, A>());
  CHECK(runtime_sum({r, r, t}) == static_sum<R, R, T>());
  CHECK(runtime_sum({a, a, r}) == static_sum<A, A, R>());
  CHECK(runtime_sum({a, a, a}) == static_sum<A, A, A>());

  for (const bool sparse : {true, false}) {
    BlockDesc block;
    block.var("w");
    block.append_op(OpDesc("test_lookup_table_grad")
                        .set_input("W", {"w"})
                        .set_output("W@GRAD", {"g"})
                        .set_attr("is_sparse", sparse));
    CHECK(block.get_var("g").kind == (sparse ? lookup_table_grad_output_kind<true>::value
                                             : lookup_table_grad_output_kind<false>::value));
  }
}

// --- text form ------------------------------------------------------------------------------

namespace {
// A program that uses every part of the text form.
ProgramDesc sample_program() {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  VarDesc& emb = global.var("emb");
  emb.shape = {100000, 64};
  emb.persistable = true;
  declare(global, "ids", var_kind::lod_tensor, data_type::int64).shape = {-1, 1};
  global.var("ids").shape = {-1, 1};
  declare(global, "rows", var_kind::selected_rows, data_type::float32);
  declare(global, "scalar", var_kind::lod_tensor, data_type::bfloat16);
  declare(global, "odd name; (with) [all]: {the} \"marks\" # too", var_kind::lod_tensor);
  declare(global, "->", var_kind::lod_tensor);
  declare(global, "nothing_yet", var_kind::empty, data_type::boolean);

  OpDesc op("test_relu");
  op.set_input("X", {"emb"}).set_output("Out", {"relu_out"}).set_output("Mask", {});
  op.set_attr("b_true", true)
      .set_attr("b_false", false)
      .set_attr("i", std::int32_t(-7))
      .set_attr("i_min", std::numeric_limits<std::int32_t>::min())
      .set_attr("i64", std::numeric_limits<std::int64_t>::max())
      .set_attr("i64_min", std::numeric_limits<std::int64_t>::min())
      .set_attr("f", 0.1f)
      .set_attr("f_big", 3.4028235e38f)
      .set_attr("f_tiny", std::numeric_limits<float>::denorm_min())
      .set_attr("f_neg_zero", -0.0f)
      .set_attr("f_inf", std::numeric_limits<float>::infinity())
      .set_attr("f_nan", std::numeric_limits<float>::quiet_NaN())
      .set_attr("d", 0.1)
      .set_attr("d_exp", 1e-300)
      .set_attr("d_neg_inf", -std::numeric_limits<double>::infinity())
      .set_attr("d_third", 1.0 / 3.0)
      .set_attr("s", std::string("plain"))
      .set_attr("s_escapes",
                std::string("quote \" backslash \\ newline \n tab \t cr \r bell \a del \x7f nul ") +
                    std::string(1, '\0') + " utf8 \xc3\xa9 end")
      .set_attr("s_empty", std::string())
      .set_attr("ints", std::vector<std::int32_t>{1, -2, 3})
      .set_attr("ints_empty", std::vector<std::int32_t>{})
      .set_attr("int64s", std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(), 0, 1})
      .set_attr("floats", std::vector<float>{0.5f, -1.25f, 1e-7f})
      .set_attr("strings", std::vector<std::string>{"a", "b, c", "\"q\"", ""})
      .set_attr("strings_empty", std::vector<std::string>{})
      .set_attr("odd attr: name", std::string("x"));
  global.append_op(op);
  global.append_op(sum_of({"rows", "rows"}, "rows_sum"));
  global.append_op(OpDesc("test_relu")
                       .set_input("X", {"odd name; (with) [all]: {the} \"marks\" # too"})
                       .set_output("Out", {"->"}));
  declare(global, "declared_after_all_ops", var_kind::lod_tensor_array, data_type::int16).shape = {};

  BlockDesc& sub = program.append_block();
  declare(sub, "local", var_kind::lod_tensor, data_type::float64);
  sub.append_op(sum_of({"local", "emb"}, "sub_sum"));
  sub.append_op(OpDesc("test_lookup_table_grad")
                    .set_input("W", {"emb"})
                    .set_input("Ids", {"ids"})
                    .set_input("Out@GRAD", {})
                    .set_output("W@GRAD", {"emb@GRAD"})
                    .set_attr("is_sparse", true)
                    .set_attr("padding_idx", std::int64_t(-1)));
  BlockDesc& empty = program.append_block(1);
  (void)empty;
  BlockDesc& third = program.append_block(1);
  third.append_op(sum_of({"local"}, "x"));
  return program;
}
}  // namespace

TEST_CASE("text form: the format", "[program][text]") {
  ProgramDesc program;
  BlockDesc& global = program.global_block();
  VarDesc& emb = global.var("emb");
  emb.shape = {100000, 64};
  emb.persistable = true;
  declare(global, "ids", var_kind::lod_tensor, data_type::int64).shape = {-1, 1};
  global.var("ids").shape = {-1, 1};
  declare(global, "unused", var_kind::selected_rows, data_type::float64);
  global.append_op(OpDesc("test_lookup_table_grad")
                       .set_input("W", {"emb"})
                       .set_input("Ids", {"ids"})
                       .set_output("W@GRAD", {"emb@GRAD"})
                       .set_attr("is_sparse", true)
                       .set_attr("padding_idx", std::int64_t(-1)));
  BlockDesc& sub = program.append_block();
  sub.append_op(sum_of({"emb@GRAD", "emb@GRAD"}, "two"));
  sub.append_op(OpDesc("test_relu").set_input("X", {"two"}).set_output("Out", {"y"}).set_output("Mask", {}));

  const std::string expected =
      "block 0\n"
      "  var emb : LoDTensor float [100000, 64] persistable\n"
      "  var ids : LoDTensor int64_t [-1, 1]\n"
      "  var unused : SelectedRows double []\n"
      "  var emb@GRAD : SelectedRows float []\n"
      "  op test_lookup_table_grad (Ids: ids; W: emb) -> (W@GRAD: emb@GRAD) {is_sparse: bool true; "
      "padding_idx: "
      "int64 -1}\n"
      "block 1 parent 0\n"
      "  var two : SelectedRows float []\n"
      "  op test_sum (X: emb@GRAD, emb@GRAD) -> (Out: two)\n"
      "  var y : LoDTensor float []\n"
      "  op test_relu (X: two) -> (Mask:; Out: y)\n";
  CHECK(to_text(program) == expected);
  CHECK(parse_program(expected) == program);
}

TEST_CASE("text form: round trip", "[program][text]") {
  const ProgramDesc program = sample_program();
  const std::string text = to_text(program);
  INFO(text);
  const ProgramDesc read = parse_program(text);
  CHECK(read == program);
  CHECK(to_text(read) == text);

  // The values themselves came back, bit for bit where it matters.
  const OpDesc& op = read.global_block().ops()[0];
  CHECK(op.attr<float>("f") == 0.1f);
  CHECK(op.attr<double>("d") == 0.1);
  CHECK(op.attr<double>("d_third") == 1.0 / 3.0);
  CHECK(op.attr<float>("f_tiny") == std::numeric_limits<float>::denorm_min());
  CHECK(std::signbit(op.attr<float>("f_neg_zero")));
  CHECK(std::isnan(op.attr<float>("f_nan")));
  CHECK(op.attr<double>("d_neg_inf") == -std::numeric_limits<double>::infinity());
  CHECK(op.attr<std::int64_t>("i64") == std::numeric_limits<std::int64_t>::max());
  CHECK(op.attr<std::int32_t>("i_min") == std::numeric_limits<std::int32_t>::min());
  CHECK(op.attr<std::string>("s_escapes") == program.global_block().ops()[0].attr<std::string>("s_escapes"));
  CHECK(op.attr<std::string>("s_escapes").size() ==
        program.global_block().ops()[0].attr<std::string>("s_escapes").size());
  CHECK(op.attr<std::vector<std::string>>("strings") == std::vector<std::string>{"a", "b, c", "\"q\"", ""});
  CHECK(op.output("Mask").empty());
  CHECK(read.block(1).ops()[1].input("Out@GRAD").empty());
  CHECK(read.num_blocks() == 4);
  CHECK(read.block(3).parent_idx() == 1u);
  CHECK(read.block(2).ops().empty());
  CHECK(read.block(2).vars().empty());
  // The escaped string is one line of text.
  CHECK(text.find("\\\"marks\\\"") != std::string::npos);
  CHECK(text.find("\\x00") != std::string::npos);
  CHECK(text.find("\\x07") != std::string::npos);
  CHECK(text.find("\\n") != std::string::npos);

  // A variable the text declares keeps its description even where an operator's
  // InferVarType would say otherwise (here: the user made an output a dense tensor).
  ProgramDesc edited = program;
  edited.global_block().var("rows_sum").kind = var_kind::lod_tensor;
  edited.global_block().var("rows_sum").shape = {8, 2};
  const ProgramDesc edited_read = parse_program(to_text(edited));
  CHECK(edited_read == edited);
  CHECK(to_text(edited_read) == to_text(edited));

  // The same edit between two operators: the one after sees the variable as the user left it
  // (a dense gradient), and so it does when the text is read.
  ProgramDesc dense;
  BlockDesc& b = dense.global_block();
  b.var("w");
  b.append_op(OpDesc("test_lookup_table_grad")
                  .set_input("W", {"w"})
                  .set_output("W@GRAD", {"g"})
                  .set_attr("is_sparse", true));
  b.var("g").kind = var_kind::lod_tensor;
  b.append_op(OpDesc("test_relu").set_input("X", {"g"}).set_output("Out", {"g"}));
  const ProgramDesc dense_read = parse_program(to_text(dense));
  CHECK(dense_read == dense);
  CHECK(dense_read.global_block().get_var("g").kind == var_kind::lod_tensor);

  // The same edit after two operators that write the gradient, and after operators that read
  // it: the text replays the operators as they were appended, each reads back.
  ProgramDesc twice;
  BlockDesc& t = twice.global_block();
  t.var("w");
  for (int i = 0; i < 2; ++i)
    t.append_op(OpDesc("test_lookup_table_grad")
                    .set_input("W", {"w"})
                    .set_output("W@GRAD", {"g"})
                    .set_attr("is_sparse", true));
  t.append_op(sum_of({"g"}, "s"));
  t.append_op(sum_of({"g"}, "s"));
  t.var("g").kind = var_kind::lod_tensor;
  const ProgramDesc twice_read = parse_program(to_text(twice));
  CHECK(twice_read == twice);
  CHECK(twice_read.global_block().get_var("s").kind == var_kind::selected_rows);
}

TEST_CASE("text form: what a person writes", "[program][text]") {
  const std::string text =
      "# a program\r\n"
      "\r\n"
      "block 0\r\n"
      "   var a : lod_tensor fp64 [2,3]   \r\n"
      "\tvar b:selected_rows float32[ ]\r\n"
      "  # operators\r\n"
      "  op test_sum(X:a,b)->(Out:c){ }\r\n"
      "  op \"test_relu\" (X: c) -> (Out: \"d\"; Mask:)\r\n"
      "block 1\n"
      "  op test_sum (X: c) -> (Out: e) {note: string \"tab\\there \\x41\"}\n";
  const ProgramDesc program = parse_program(text);
  const BlockDesc& global = program.global_block();
  CHECK(global.get_var("a").dtype == data_type::float64);
  CHECK(global.get_var("a").shape == std::vector<std::int64_t>{2, 3});
  CHECK(global.get_var("b").kind == var_kind::selected_rows);
  CHECK(global.get_var("c").kind == var_kind::lod_tensor);  // declared by the operator, inferred
  CHECK(global.get_var("c").dtype == data_type::float64);
  CHECK(global.get_var("d").kind == var_kind::lod_tensor);
  REQUIRE(program.num_blocks() == 2);
  CHECK(program.block(1).parent_idx() == 0u);
  CHECK(program.block(1).ops()[0].attr<std::string>("note") == "tab\there A");
  CHECK(program.block(1).get_var("e").dtype == data_type::float64);

  // The text form of what was read reads back the same.
  CHECK(parse_program(to_text(program)) == program);

  // An empty text is an empty program.
  CHECK(parse_program("") == ProgramDesc());
  CHECK(parse_program("# nothing\n\n") == ProgramDesc());
  CHECK(to_text(ProgramDesc()) == "block 0\n");
  CHECK(parse_program("block 0") == ProgramDesc());
}

TEST_CASE("text form: errors name the line and what was expected", "[program][text]") {
  auto message = [](std::string_view text) { return error_of([&] { parse_program(text); }); };

  // Syntax.
  CHECK(message("var a : LoDTensor float []") ==
        "fluidk: program text, line 1: expected 'block 0' before the first 'var'");
  CHECK(message("block 0\n  var x LoDTensor float []") ==
        "fluidk: program text, line 2: expected ':' after the variable name 'x', found 'LoDTensor'");
  CHECK(message("block 0\n\n  var x : Tensor float []") ==
        "fluidk: program text, line 3: unknown variable kind 'Tensor'; accepted: LoDTensor, SelectedRows, "
        "LoDTensorArray, StepScopes, nothing");
  CHECK_THAT(message("block 0\n  var x : LoDTensor flaot []"),
             Catch::StartsWith("fluidk: program text, line 2: unknown data type 'flaot'; accepted: float"));
  CHECK(message("block 0\n  var x : LoDTensor float [2, x]") ==
        "fluidk: program text, line 2: expected a dimension (an integer) in the shape of 'x', found 'x'");
  CHECK(message("block 0\n  var x : LoDTensor float [2, -2]") ==
        "fluidk: program text, line 2: dimension -2 in the shape of 'x': extents are non-negative, or -1 for "
        "one known only at run time");
  CHECK(parse_program("block 0\n  var x : LoDTensor float [-1, 3]").block(0).var("x").shape ==
        std::vector<std::int64_t>{-1, 3});
  CHECK(message("block 0\n  var \"\" : LoDTensor float []") ==
        "fluidk: program text, line 2: expected a variable name after 'var', found an empty name \"\"");
  CHECK(message("block 0\n  var x : LoDTensor float []\n  op test_sum (X: \"\") -> (Out: x)") ==
        "fluidk: program text, line 3: expected a variable name in the input slot 'X', found an empty name "
        "\"\"");
  CHECK(message("block 0\n  var x : LoDTensor float [2") ==
        "fluidk: program text, line 2: expected ']' to close the shape of 'x', found the end of the line");
  CHECK(message("block 0\n  var x : LoDTensor float [] persistent") ==
        "fluidk: program text, line 2: expected 'persistable' or the end of the line after the shape of 'x'");
  CHECK(message("block 0\n  var x : LoDTensor float []\n  var x : LoDTensor float []") ==
        "fluidk: program text, line 3: variable 'x' is already declared in block 0");
  CHECK(
      message("block 0\n  vra x") ==
      "fluidk: program text, line 2: expected 'block', 'var' or 'op' at the start of the line, found 'vra'");
  CHECK(message("block 0\n  (x)") ==
        "fluidk: program text, line 2: expected 'block', 'var' or 'op' at the start of the line, found '('");
  CHECK(message("block 1") == "fluidk: program text, line 1: expected block 0, found block 1");
  CHECK(message("block 0\nblock 2 parent 0") ==
        "fluidk: program text, line 2: expected block 1, found block 2");
  CHECK(message("block 0 parent 0") ==
        "fluidk: program text, line 1: block 0 is the global block and has no parent");
  CHECK(message("block 0\nblock 1 parent 1") ==
        "fluidk: program text, line 2: block 1 names parent 1; a parent comes before its child");
  CHECK(message("block 0\nblock 1 child 0") ==
        "fluidk: program text, line 2: expected 'parent' or the end of the line after the block index, found "
        "'child'");
  CHECK(message("block zero") ==
        "fluidk: program text, line 1: expected a block index after 'block', found 'zero'");
  CHECK(message("block 0\n  op test_sum X: a) -> (Out: b)") ==
        "fluidk: program text, line 2: expected '(' to open the input slots, found 'X'");
  CHECK(message("block 0\n  op test_sum (X a) -> (Out: b)") ==
        "fluidk: program text, line 2: expected ':' after the input slot 'X', found 'a'");
  CHECK(message("block 0\n  op test_sum (X: a) (Out: b)") ==
        "fluidk: program text, line 2: expected '->' between the input and the output slots, found '('");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b") ==
        "fluidk: program text, line 2: expected ')' to close the output slots, found the end of the line");
  CHECK(message("block 0\n  op test_sum (X: a; X: b) -> (Out: c)") ==
        "fluidk: program text, line 2: input slot 'X' appears twice");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: integer 1}") ==
        "fluidk: program text, line 2: unknown attribute kind 'integer'; accepted: bool, int, int64, float, "
        "double, string, ints, int64s, floats, strings, bools, block, blocks");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: int 3000000000}") ==
        "fluidk: program text, line 2: an integer for attribute 'n' '3000000000' is out of range");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: bool yes}") ==
        "fluidk: program text, line 2: expected true or false for attribute 'n', found 'yes'");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: float 1.5x}") ==
        "fluidk: program text, line 2: expected a number for attribute 'n', found '1.5x'");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: string abc}") ==
        "fluidk: program text, line 2: expected a quoted string for attribute 'n', found 'abc'");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: string \"abc}") ==
        "fluidk: program text, line 2: a quoted string does not end before the end of the line");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: string \"a\\qb\"}") ==
        "fluidk: program text, line 2: unknown escape \\q in a quoted string; accepted: \\\" \\\\ \\n \\t "
        "\\r \\xHH");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: string \"\\x4\"}") ==
        "fluidk: program text, line 2: expected two hexadecimal digits after \\x in a quoted string");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: ints [1, 2}") ==
        "fluidk: program text, line 2: expected ']' to close the list attribute 'n', found '}'");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: int 1; n: int 2}") ==
        "fluidk: program text, line 2: attribute 'n' appears twice");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) {n: int 1") ==
        "fluidk: program text, line 2: expected '}' to close the attributes, found the end of the line");
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b) extra") ==
        "fluidk: program text, line 2: expected the end of the line, found 'extra'");

  // The validation of append_op, with the line.
  const std::string declared = "block 0\n  var a : LoDTensor float []\n";
  CHECK_THAT(message(declared + "  op no_such_op (X: a) -> (Out: b)"),
             Catch::StartsWith("fluidk: program text, line 3: unknown operator 'no_such_op'; registered: "));
  CHECK_THROWS_AS(parse_program(declared + "  op no_such_op (X: a) -> (Out: b)"), not_registered);
  CHECK(message(declared + "  op test_sum (Y: a) -> (Out: b)") ==
        "fluidk: program text, line 3: operator 'test_sum' has no input slot 'Y'; its input slots are 'X'");
  CHECK(message(declared + "  op test_sum (X: a, z) -> (Out: b)") ==
        "fluidk: program text, line 3: operator 'test_sum' input slot 'X': variable 'z' is used before it is "
        "declared");
  CHECK(message(declared + "  op test_sum (X: a) -> ()") ==
        "fluidk: program text, line 3: operator 'test_sum' has no output slot 'Out'; it has none");
  CHECK(message(declared + "  op test_lookup_table_grad (W: a) -> (W@GRAD: g) {is_sparse: int 1}") ==
        "fluidk: program text, line 3: operator 'test_lookup_table_grad' attribute 'is_sparse' holds int, "
        "not bool");
  CHECK(message(declared + "  var arr : LoDTensorArray float []\n  op test_sum (X: arr, a) -> (Out: b)") ==
        "fluidk: program text, line 4: operator 'test_sum' input slot 'X': if any input is a LoDTensorArray, "
        "all "
        "must be; 'arr' is a LoDTensorArray but 'a' is a LoDTensor");
  // A variable of block 1 is not visible in block 0; a variable of block 0 is visible in block 1.
  CHECK(message(declared +
                "block 1\n  var local : LoDTensor float []\nblock 2 parent 0\n  op test_sum (X: local) -> "
                "(Out: b)") ==
        "fluidk: program text, line 6: operator 'test_sum' input slot 'X': variable 'local' is used before "
        "it is "
        "declared");
  CHECK(message(declared + "block 1\n  op test_sum (X: a) -> (Out: b)").empty());
  // A use before the declaration, in text order.
  CHECK(message("block 0\n  op test_sum (X: a) -> (Out: b)\n  var a : LoDTensor float []") ==
        "fluidk: program text, line 2: operator 'test_sum' input slot 'X': variable 'a' is used before it is "
        "declared");
}

TEST_CASE("text form: every refusal is a parse_error that names its line", "[program][text]") {
  auto message = [](std::string_view text) { return error_of([&] { parse_program(text); }); };
  const std::string declared = "block 0\n  var a : LoDTensor float []\n";
  // What append_op refuses is a parse error of the text too (an unknown operator stays
  // not_registered, which says more).
  for (const std::string& text :
       {declared + "  op test_sum (Y: a) -> (Out: b)", declared + "  op test_sum (X: a, z) -> (Out: b)",
        declared + "  op test_lookup_table_grad (W: a) -> (W@GRAD: g) {is_sparse: int 1}",
        declared + "  op test_sum (X: a) -> (Out: b) {op_device: int 1}"}) {
    INFO(text);
    CHECK_THROWS_AS(parse_program(text), parse_error);
    CHECK_THAT(message(text), Catch::StartsWith("fluidk: program text, line 3: "));
  }
  // A character no token starts with is shown, escaped when it is a control character.
  CHECK(message("block 0\n  var x\x01y : LoDTensor float []") ==
        "fluidk: program text, line 2: expected ':' after the variable name 'x', found '\\x01'");
  CHECK(message("block 0\f") ==
        "fluidk: program text, line 1: expected 'parent' or the end of the line after the block index, found "
        "'\\x0c'");
  // Integers that do not fit are refused with the line, never wrapped.
  CHECK(message("block 0\n  var x : LoDTensor float [9223372036854775808]") ==
        "fluidk: program text, line 2: a dimension (an integer) in the shape of 'x' '9223372036854775808' is "
        "out of range");
  CHECK(message("block 0\n  var x : LoDTensor float [-9223372036854775808]") ==
        "fluidk: program text, line 2: dimension -9223372036854775808 in the shape of 'x': extents are "
        "non-negative, or -1 for one known only at run time");
  // A var or op line before the first block line, though block lines follow.
  CHECK(message("  var x : LoDTensor float [2]\nblock 0\nblock 1 parent 0\n") ==
        "fluidk: program text, line 1: expected 'block 0' before the first 'var'");
  CHECK(message("  op test_relu () -> (Out: y)\nblock 0\n") ==
        "fluidk: program text, line 1: expected 'block 0' before the first 'op'");
  // A var line that would shadow the enclosing block's variable an operator already uses.
  const std::string shadowing =
      "block 0\n  var x : LoDTensor float []\nblock 1 parent 0\n  op test_relu (X: x) -> (Out: y)\n"
      "  var x : LoDTensor float []\n";
  CHECK_THROWS_AS(parse_program(shadowing), parse_error);
  CHECK_THAT(message(shadowing),
             Catch::StartsWith("fluidk: program text, line 5: block 1 cannot declare 'x'"));
  CHECK(message("block 18446744073709551616") ==
        "fluidk: program text, line 1: a block index after 'block' '18446744073709551616' is out of range");
  CHECK(message(declared + "  op test_sum (X: a) -> (Out: b) {n: int64s [1, 9223372036854775808]}") ==
        "fluidk: program text, line 3: an integer for attribute 'n' '9223372036854775808' is out of range");
  CHECK(message(declared + "  op test_sum (X: a) -> (Out: b) {n: float 1e39}") ==
        "fluidk: program text, line 3: a number for attribute 'n' '1e39' is out of range");
}
