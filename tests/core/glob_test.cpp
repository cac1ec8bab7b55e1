// expand_globs: tf.gfile.Glob's matching (GetMatchingPaths in TensorFlow's file_system_helper.cc:
// fnmatch with FNM_PATHNAME, level by level, each directory's entries in readdir order) and the
// two orders bertbench uses — sorted, and the directory's own (create_pretraining_data.py's).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "test_util.hpp"

namespace bertbench {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::TmpDir;

void touch(const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x\n";
}

// The directory's entries as readdir lists them (std::filesystem iterates with readdir too),
// joined to `dir` as given.
std::vector<std::string> listed(const std::string& dir, const std::string& suffix) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(suffix)) out.push_back(dir + "/" + name);
    }
    return out;
}

TEST(Glob, DirectoryOrderIsReaddirsAndSortedIsSorted) {
    TmpDir t("bb_glob");
    const std::string d = t.path.string();
    // enough names that a hashed or reverse-creation directory order differs from sorted
    for (const char* n : {"wiki_10.txt", "wiki_00.txt", "b.txt", "wiki_03.txt", "a.txt", "wiki_11.txt", "c.txt",
                          "wiki_01.txt", "wiki_02.txt", "skip.md"})
        touch(t.path / n);
    const std::vector<std::string> dir_order = listed(d, ".txt");
    ASSERT_EQ(dir_order.size(), 9u);
    EXPECT_EQ(expand_globs(d + "/*.txt", "--input_file", GlobOrder::directory), dir_order);
    std::vector<std::string> sorted = dir_order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(expand_globs(d + "/*.txt", "--input_file"), sorted);
    // a comma list keeps its items' order; a path without wildcards is itself
    const std::vector<std::string> two = expand_globs(d + "/c.txt," + d + "/a.txt", "--input_file", GlobOrder::directory);
    EXPECT_EQ(two, (std::vector<std::string>{d + "/c.txt", d + "/a.txt"}));
}

TEST(Glob, MatchesAsTensorFlowDoes) {
    TmpDir t("bb_glob");
    const std::string d = t.path.string();
    touch(t.path / ".hidden.txt");  // fnmatch without FNM_PERIOD: '*' matches a leading dot
    touch(t.path / "x1" / "part-0.txt");
    touch(t.path / "x2" / "part-1.txt");
    touch(t.path / "y1" / "part-2.txt");
    touch(t.path / "x3");  // a file where the pattern wants a directory: not descended into
    EXPECT_EQ(expand_globs(d + "/*.txt", "f", GlobOrder::sorted), (std::vector<std::string>{d + "/.hidden.txt"}));
    // wildcards at two levels; '*' does not cross '/' (FNM_PATHNAME)
    EXPECT_EQ(expand_globs(d + "/x*/part-*.txt", "f", GlobOrder::sorted),
              (std::vector<std::string>{d + "/x1/part-0.txt", d + "/x2/part-1.txt"}));
    EXPECT_EQ(expand_globs(d + "/[xy]?/part-[12].txt", "f", GlobOrder::sorted),
              (std::vector<std::string>{d + "/x2/part-1.txt", d + "/y1/part-2.txt"}));
    EXPECT_EQ(error_of([&] { expand_globs(d + "/*.tfrecord", "--input_file"); }),
              "--input_file: \"" + d + "/*.tfrecord\" matches no file");
    EXPECT_EQ(error_of([&] { expand_globs(d + "/*/part-0.txt/*", "--input_file"); }),
              "--input_file: \"" + d + "/*/part-0.txt/*\" matches no file");
    // a relative pattern with no directory before its wildcard: TensorFlow joins "." in front
    const fs::path cwd = fs::current_path();
    fs::current_path(t.path / "x1");
    const std::vector<std::string> relative = expand_globs("part-*.txt", "f");
    const std::vector<std::string> plain = expand_globs("part-0.txt", "f");
    fs::current_path(cwd);
    EXPECT_EQ(relative, (std::vector<std::string>{"./part-0.txt"}));
    EXPECT_EQ(plain, (std::vector<std::string>{"part-0.txt"}));
}

}  // namespace
}  // namespace bertbench
