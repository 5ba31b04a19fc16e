// Programs: VarDesc, OpDesc, BlockDesc and ProgramDesc with append_op and the building blocks
// of InferVarType (program/desc.hpp), and a text form that can be written
// (program/text_writer.hpp) and read back (program/text_reader.hpp). This header brings them
// all; the executor needs only the descriptions.
//
// A BlockDesc holds variables (by name, in the order they were declared) and operators (in
// order); an operator sees the variables of its block and of the enclosing blocks. append_op
// validates an operator against the registry (fluidk/operator_registry.hpp) before it changes
// anything: the operator is registered, every slot it is given is one the operator
// declares, every input variable is declared, and the attributes dispatch reads have their
// kinds (op_device a string; the registered libraries' request attributes, such as
// use_cudnn, bools). Then it declares the
// outputs that no visible block has (in its own block) and runs the operator's InferVarType
// (registered with the operator as `static void infer_var_type(const OpDesc&, BlockDesc&)`;
// default: every output a dense LoDTensor), which sets the kinds and data types of the
// outputs and may reject the operator (wrong kinds of inputs or attributes). On any error
// the block is left as it was: the variables the operator names are restored, the ones
// declared on the way removed, and the operator is not appended.
//
// Text form, one line per item; leading blanks are ignored, as are empty lines and lines
// whose first non-blank character is '#':
//
//   block 0
//     var emb : LoDTensor float [100000, 64] persistable
//     var ids : LoDTensor int64_t [-1, 1]
//     op lookup_table (Ids: ids; W: emb) -> (Out: x) {is_sparse: bool true; padding_idx: int64 -1}
//   block 1 parent 0
//     op sum (X: x, y; Extra:) -> (Out: z)
//
//   block N [parent P]   starts block N; blocks come in order, block 0 first (it has no
//                        parent), every other block names a parent before it (default 0)
//   var NAME : KIND DTYPE [D0, D1, ...] [persistable]
//                        KIND: LoDTensor, SelectedRows, LoDTensorArray, StepScopes or nothing
//                        (also lod_tensor, selected_rows, lod_tensor_array, step_scopes,
//                        empty); DTYPE: a data
//                        type name as fluidk/dtype.hpp reads it; the shape may be [] (a
//                        scalar, or not known: append_op makes outputs without a shape)
//   op TYPE (SLOT: NAME, ...; ...) -> (SLOT: NAME, ...; ...) [{ATTR: KIND VALUE; ...}]
//                        slots are written in name order; a slot may be empty ("X:")
//
// Attribute kinds and values: bool (true, false), int and int64 (decimal), float and double
// (shortest text that reads back to the same value; inf, -inf, nan), string ("..." with
// \" \\ \n \t \r and \xHH escapes), the lists ints, int64s, floats, strings, bools
// ([v, v, ...]), block (a sub-block's index: "sub_block: block 1") and blocks ([1, 2]). A block
// attribute may name a block written after the operator's own: the block lines are read first.
// A name (variable, slot, operator, attribute) is written bare when it holds none of
// blanks, control characters, ( ) [ ] { } , ; : " #, and is not "->"; else quoted like a
// string.
//
// Reading replays the text through the same calls a program is built with: var lines
// declare variables (BlockDesc::var), op lines go through append_op, so unknown operators,
// unknown slots, variables used before their declaration and attributes of the wrong kind
// for the operator's InferVarType are errors, each naming the line. A var line holds the
// variable's final description: it is applied where it stands and again when the whole text
// is read, so that what InferVarType sets on the way does not override it; and an operator
// refused as the variables stand is tried again with the variables it names as their var
// lines describe them (a description edited between two operators, as a gradient made dense
// after the operator that writes it and before one that reads it). to_text
// writes each variable before the first operator that uses it, so that
// write → read → write gives the same text and reading gives an equal ProgramDesc.
#pragma once

#include "fluidk/program/desc.hpp"
#include "fluidk/program/text_reader.hpp"
#include "fluidk/program/text_writer.hpp"
