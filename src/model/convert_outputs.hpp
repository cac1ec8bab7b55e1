// `convert`'s checks of where it writes, before any tensor is read (model/convert.cpp's).
#pragma once

#include <string>
#include <vector>

namespace bertbench::model {

// --output of --to=tf: a prefix (PREFIX.index, PREFIX.data-*). Error naming it when it is a
// directory, ends in '/', or is a stream (a device, a FIFO, /dev/stdout), where no names can be
// appended.
void check_tf_prefix(const std::string& output);
// Without --overwrite: an output that exists is an error (a stream is written into, nothing
// replaced), and so is a `checkpoint` file in the directory (`tf_state`, "" for other formats)
// that is not TensorFlow's state file (the user's own, which --to=tf would rewrite).
void check_outputs_free(const std::string& output, const std::vector<std::string>& outs,
                        const std::string& tf_state, bool overwrite);

}  // namespace bertbench::model
