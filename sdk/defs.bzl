"""argsdump_sim_test: a cc_test of your own kernels on the simulated device.

    load("@argsdump//sdk:defs.bzl", "argsdump_sim_test")

    argsdump_sim_test(
        name = "layer_norm_test",
        srcs = ["layer_norm_test.cc"],
        deps = [":kernels"],
        dump_args = 2,
    )

The test links the SDK (//sdk:argsdump), its test library (//sdk:testing)
and a gtest main that takes the dump flags off argv (//sdk:gtest_main).
`dump_args` is the level the test dumps at when nothing else says: it is
the lowest entry, below the config file, ARGSDUMP_LEVEL
(--test_env=ARGSDUMP_LEVEL=0) and the command line
(--test_arg=--dump-args=N). Captures land in the test's undeclared outputs
(bazel-testlogs/<pkg>/<name>/test.outputs/outputs.zip).
"""

def argsdump_sim_test(
        name,
        srcs,
        deps = [],
        dump_args = None,
        capture_server = False,
        args = [],
        data = [],
        **kwargs):
    """Declares the test.

    Args:
      name: the test's name.
      srcs: its sources (TEST()s; no main()).
      deps: its libraries (your kernels).
      dump_args: the default dump level, 0..3 (None: 0, off); any other
        value is a WARNING when the test runs and the level falls back to 0.
      capture_server: puts @argsdump//server:capture_server in the runfiles,
        for argsdump::testing::CaptureServerProcess.
      args: more arguments for the test binary.
      data: more runfiles.
      **kwargs: anything else cc_test takes (size, tags, shard_count, ...).
    """
    default = []
    if dump_args != None:
        # Passed as given: a value other than 0..3 is a WARNING of the test
        # (naming --dump-args-default and the fallback, 0), never a failed
        # build, since the dump never fails a test by itself.
        default = ["--dump-args-default=%s" % str(dump_args).replace(" ", "")]
    native.cc_test(
        name = name,
        srcs = srcs,
        deps = deps + [
            Label("//sdk:argsdump"),
            Label("//sdk:testing"),
            Label("//sdk:gtest_main"),
        ],
        args = default + args,
        data = data + ([Label("//server:capture_server")] if capture_server else []),
        **kwargs
    )
