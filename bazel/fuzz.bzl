"""libFuzzer targets and the tests that replay their seeds."""

def argsdump_fuzzer(name, srcs, deps, corpus):
    """One libFuzzer target over untrusted bytes.

    Makes <name>_fuzzer, the libFuzzer binary (bazel build --config=fuzz;
    tools/fuzz.sh runs it for a bounded time), and <name>_fuzz_replay_test,
    which in every plain, ASan and TSan pass feeds LLVMFuzzerTestOneInput the
    seeds in `corpus` (a folder of this package) - and any crash input added
    there once fixed.

    Args:
      name: the parser's name (zip_archive, manifest_reader, ...).
      srcs: the file defining LLVMFuzzerTestOneInput.
      deps: what it calls.
      corpus: the seed folder, relative to the package.
    """
    native.cc_library(
        name = name + "_fuzz_target",
        testonly = True,
        srcs = srcs,
        deps = deps,
        alwayslink = True,
    )
    native.cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = [":" + name + "_fuzz_target"],
    )
    native.cc_test(
        name = name + "_fuzz_replay_test",
        size = "small",
        args = [native.package_name() + "/" + corpus],
        data = native.glob([corpus + "/*"]),
        # A parser run over its seeds on one thread: ASan's, not TSan's.
        tags = ["single_threaded"],
        deps = [
            ":" + name + "_fuzz_target",
            "//tests:fuzz_replay_main",
        ],
    )
