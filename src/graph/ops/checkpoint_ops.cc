// Checkpoint ops. Both run on the device that holds the variables they name
// (they take them by reference, so the placer colocates them), which is how
// a checkpoint is written and read by the ps tasks themselves: no variable
// travels to the client.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "graph/attr_value.h"
#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace distflow {
namespace {

absl::Status NamesMatchVars(InferenceContext* c) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, GetAttrStringList(c->node(), "names"));
  ASSIGN_OR_RETURN(std::vector<DataType> dtypes, GetAttrTypeList(c->node(), "dtypes"));
  if (names.size() != dtypes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("has ", names.size(), " names for ", dtypes.size(), " variables"));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCheckpointOps(OpRegistry* r) {
  // Writes the variables' values to the data file `path` (through a
  // temporary file and a rename) and outputs the file's footer (a serialized
  // CheckpointShardFooter: names, dtypes, shapes, offsets, crc32c), from
  // which the saving client builds the checkpoint's index.
  r->MustRegister(OpDefBuilder("SaveShard")
                      .Input("path: string")
                      .Input("vars: Ref(dtypes)")
                      .Output("footer: string")
                      .Attr("dtypes: list(type)")
                      .Attr("names: list(string)")
                      .SetIsStateful()
                      .SetShapeFn([](InferenceContext* c) {
                        RETURN_IF_ERROR(NamesMatchVars(c));
                        return ScalarShape(c);
                      }));
  // Sets each variable to the tensor `names[i]` of data file `files[i]`
  // or, with `plans`, fills it as the serialized RestorePlan `files[i]`
  // says (blocks of a checkpoint's slices), after checking every file's
  // footer, every tensor's crc32c, dtype and shape: either all variables are
  // set or none is.
  r->MustRegister(OpDefBuilder("RestoreShard")
                      .Input("files: string")
                      .Input("vars: Ref(dtypes)")
                      .Attr("dtypes: list(type)")
                      .Attr("names: list(string)")
                      .Attr("plans: bool = false")
                      .SetIsStateful()
                      .SetShapeFn(NamesMatchVars));
}

}  // namespace distflow
