#!/usr/bin/env python3
"""Checks what FLUIDK_SEPARATE_RUNTIME promises (docs/getting-started.md, "Compiling the runtime
once"): the runtime's own file (libfluidk_runtime.a) defines each of the functions listed below,
and a file built with the macro (separate_runtime_calls.cpp, which calls them all) defines none of
them, not even as an inline copy, and calls each as defined there, except the private members
listed in INTERNAL, which only the runtime's own functions call. The other archives given, the
rest of a program built with the macro, define none of them either.

  separate_runtime_check.py NM RUNTIME_ARCHIVE CALLER_ARCHIVE [ARCHIVE...]
"""
import subprocess
import sys

# The functions compiled once, demangled, up to their parameters.
EXPECTED = [
    "fluidk::run_operator", "fluidk::explain[abi:cxx11]", "fluidk::expected_kernel_key",
    "fluidk::transform_variable", "fluidk::transform_input", "fluidk::Executor::prepare",
    "fluidk::Executor::run", "fluidk::Executor::invocations", "fluidk::plan_transform",
    "fluidk::transform", "fluidk::transform_plan::apply", "fluidk::transform_plan::check",
    "fluidk::transform_plan::describe[abi:cxx11]",
    "fluidk::to_dot[abi:cxx11]", "fluidk::parse_program", "fluidk::to_text[abi:cxx11]",
    "fluidk::parse_place", "fluidk::storage_numel", "fluidk::parse_data_layout",
    "fluidk::detail::add_layout", "fluidk::detail::add_library",
    "fluidk::detail::place_kind_registry::add",
    # The descriptions, scopes, attribute maps and the registry: their copies, comparisons and
    # containers' work.
    "fluidk::attribute_map::set", "fluidk::OpDesc::OpDesc", "fluidk::BlockDesc::append_op",
    "fluidk::BlockDesc::var", "fluidk::ProgramDesc::ProgramDesc", "fluidk::Scope::var",
    "fluidk::Scope::new_scope", "fluidk::operator_registry::add", "fluidk::operator_info::lookup",
]

# Private members compiled once, which a file outside the runtime cannot call: demangled, up to
# their parameters, or with the start of the parameters where a public overload shares the name.
INTERNAL_OVERLOADS = [
    "fluidk::Executor::prepare(std::span<fluidk::op_invocation const, 18446744073709551615ul>, fluidk::Scope&, "
    "fluidk::BlockDesc const*",
]
INTERNAL = {
    "fluidk::BlockDesc::take", "fluidk::BlockDesc::truncate_vars", "fluidk::OpDesc::get", "fluidk::OpDesc::set",
    "fluidk::operator_info::build_table", "fluidk::operator_info::choose",
    "fluidk::operator_info::lookup_outside", "fluidk::transfer_cache::erase",
    "fluidk::Executor::prepared::control::~control",
} | {"fluidk::Executor::" + name for name in (
    "abandon_steps", "after_op", "bad_condition", "begin_count", "choose", "condition_holds", "context_for",
    "add_retained", "copied_bytes", "count_flow_writes", "count_listed", "count_retained", "count_step",
    "count_storages", "count_tensor", "drop_step_scopes", "listed", "lists", "local_for", "make_locals", "move_inputs",
    "hand_over", "owner_of",
    "own_copy", "rebind", "release", "reseat", "run_control", "run_instrumented", "run_op_slowly", "step_scopes_of",
    "run_step", "same_states", "share_content", "uncount_storages", "variable_named")}


def symbols(nm, archive):
    """(type, demangled name) of each symbol of the archive."""
    out = subprocess.run([nm, "-C", archive], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        # "ADDRESS TYPE NAME", or "TYPE NAME" after blanks for an undefined symbol.
        parts = line.split(maxsplit=2) if line[:1] != " " else ["", *line.split(maxsplit=1)]
        if len(parts) == 3 and len(parts[1]) == 1:
            rows.append((parts[1], parts[2]))
    return rows


def main():
    nm, runtime, caller, others = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    compiled = sorted(n for t, n in symbols(nm, runtime) if t == "T" and n.startswith("fluidk::"))
    failures = [f"{runtime} does not define {name}" for name in EXPECTED
                if not any(n.split("(")[0] == name for n in compiled)]
    for archive in [caller, *others]:
        rows = symbols(nm, archive)
        defined = {n for t, n in rows if t not in ("U", "w", "v")}
        failures += [f"{archive} compiles {n} again" for n in compiled if n in defined]
        if archive == caller:
            called = {n for t, n in rows if t == "U"}
            failures += [f"{archive} does not call {n}" for n in compiled
                         if n not in called and n.split("(")[0] not in INTERNAL
                         and not any(n.startswith(o) for o in INTERNAL_OVERLOADS)]
    for line in failures:
        print(line)
    print(f"{len(compiled)} functions compiled once, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
